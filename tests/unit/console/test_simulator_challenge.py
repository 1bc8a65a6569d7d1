"""``WWW-Authenticate`` parsing for the simulator's API call (RFC 9110 §11.6.1), and the
choice of the OpenAPI operation it calls."""

from __future__ import annotations

from frontdoor_console.simulator.api_call import first_operation
from frontdoor_console.simulator.challenge import Challenge, parse_challenges


def test_one_dpop_challenge_with_quoted_and_escaped_values() -> None:
    got = parse_challenges('DPoP error="sign_in_required", error_description="Sign in \\"first\\", please", '
                           'scope="orders:read", algs="ES256"')
    assert got == [Challenge(scheme="DPoP", params={"error": "sign_in_required",
                                                    "error_description": 'Sign in "first", please',
                                                    "scope": "orders:read", "algs": "ES256"})]
    assert got[0].error == "sign_in_required"


def test_two_challenges_an_mcp_server_sends() -> None:
    got = parse_challenges('Bearer resource_metadata="https://x.example/.well-known/oauth-protected-resource/mcp", '
                           'DPoP error=invalid_token, algs="ES256 PS256"')
    assert [c.scheme for c in got] == ["Bearer", "DPoP"]
    assert got[0].params == {"resource_metadata": "https://x.example/.well-known/oauth-protected-resource/mcp"}
    assert got[1].params == {"error": "invalid_token", "algs": "ES256 PS256"}


def test_bare_schemes_and_nothing() -> None:
    assert parse_challenges("Bearer") == [Challenge(scheme="Bearer")]
    assert parse_challenges("Bearer, DPoP") == [Challenge(scheme="Bearer"), Challenge(scheme="DPoP")]
    assert parse_challenges("") == []
    assert parse_challenges('"quoted"') == []
    assert parse_challenges('DPoP error="open') == []
    assert parse_challenges("Negotiate abc==") == [Challenge(scheme="Negotiate")]


def test_the_first_get_without_path_parameters_under_the_first_server() -> None:
    doc = {"servers": [{"url": "/v2"}], "paths": {"/items/{id}": {"get": {}}, "/orders": {"post": {}},
                                                 "/items": {"get": {}}}}
    assert first_operation(doc, "https://api.example/openapi.json") == "https://api.example/v2/items"
    assert first_operation({"paths": {"/a": {"get": {}}}}, "https://api.example/docs/openapi.json") \
        == "https://api.example/a"
    assert first_operation({"paths": {"/a/{x}": {"get": {}}}}, "https://api.example/o.json") is None
    assert first_operation([], "https://api.example/o.json") is None
