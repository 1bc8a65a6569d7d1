"""1.0 helpers of the sdk: the session-state client, the company's RFC 9728 document,
the 1.0 refusals (ADR 0004 §7) and strip_credentials."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from frontdoor_protocol import ErrorCode, ProtocolError
from frontdoor_sdk import (
    CREDENTIAL_HEADERS,
    company_protected_resource_metadata,
    delegated_refusal,
    protected_resource_metadata_url,
    strip_credentials,
)
from frontdoor_sdk.session_state import SessionStateClient, SessionStateRefused, SessionStateUnavailable

from .kit import CREDENTIAL, ISSUER

STATE_URL = f"{ISSUER}/poppy/session-state"
METADATA = "https://shop.example/.well-known/oauth-protected-resource"


def _client(answer: httpx.Response, asked: list[dict[str, Any]]) -> SessionStateClient:
    def handle(request: httpx.Request) -> httpx.Response:
        assert str(request.url) == STATE_URL and request.method == "POST"
        asked.append({"authorization": request.headers["authorization"], **json.loads(request.content)})
        return answer

    return SessionStateClient(STATE_URL, CREDENTIAL, httpx.AsyncClient(transport=httpx.MockTransport(handle)))


async def test_session_state_sends_the_contract_and_reads_the_answer() -> None:
    """ADR 0004 §6: {client_id, sid, sub, agent_id?, jti, iat, sgn?} with the credential."""
    asked: list[dict[str, Any]] = []
    client = _client(httpx.Response(200, json={"state": "active", "session": "ses_1", "signed_in": True,
                                                "account": "acct_1", "scope": "orders:read"}), asked)
    state = await client.check(client_id="https://a.example/c", sid="s1", sub="u1", jti="j1", iat=5, sgn="sgn_1")
    assert (state.state, state.session, state.signed_in, state.account) == ("active", "ses_1", True, "acct_1")
    assert asked == [{"authorization": f"Bearer {CREDENTIAL}", "client_id": "https://a.example/c", "sid": "s1",
                      "sub": "u1", "jti": "j1", "iat": 5, "sgn": "sgn_1"}]
    await client.check(client_id="https://a.example/c", sid="s1", sub="u1", jti="j2", iat=5, agent_id="ag")
    assert asked[1]["agent_id"] == "ag" and "sgn" not in asked[1]


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(503, headers={"Retry-After": "4"}),
        httpx.Response(429, headers={"Retry-After": "4"}),
        httpx.Response(200, content=b"{}"),
        httpx.Response(200, json={"state": "maybe"}),
        httpx.Response(200, content=b"nope"),
    ],
)
async def test_session_state_fails_closed(answer: httpx.Response) -> None:
    with pytest.raises(SessionStateUnavailable) as caught:
        await _client(answer, []).check(client_id="c", sid="s", sub="u", jti="j", iat=1)
    if answer.status_code != 200:
        assert caught.value.retry_after == "4"


@pytest.mark.parametrize("status", [401, 403])
async def test_session_state_credential_refused(status: int) -> None:
    with pytest.raises(SessionStateRefused):
        await _client(httpx.Response(status), []).check(client_id="c", sid="s", sub="u", jti="j", iat=1)


def test_the_company_document() -> None:
    """RFC 9728 §2 at the root: resource = https://{domain}, authorization_servers = [issuer]."""
    document = company_protected_resource_metadata("https://shop.example/", ISSUER, scopes=["orders:read"])
    assert document == {
        "resource": "https://shop.example",
        "authorization_servers": [ISSUER],
        "bearer_methods_supported": ["header"],
        "scopes_supported": ["orders:read"],
        "dpop_signing_alg_values_supported": ["ES256"],
        "dpop_bound_access_tokens_required": False,
    }
    assert protected_resource_metadata_url(document["resource"]) == METADATA


@pytest.mark.parametrize("origin", ["https://shop.example/api", "https://Shop.example", "shop.example",
                                    "https://shop.example?x=1"])
def test_the_company_document_takes_an_origin_only(origin: str) -> None:
    with pytest.raises(ValueError):
        company_protected_resource_metadata(origin, ISSUER)


@pytest.mark.parametrize("code", [ErrorCode.INVALID_SESSION, ErrorCode.SESSION_ENDED])
def test_session_errors_are_400_json_without_a_challenge(code: ErrorCode) -> None:
    """ADR 0004 §7: invalid_session and session_ended carry no WWW-Authenticate."""
    refusal = delegated_refusal(ProtocolError(code, "static words"), resource_metadata=METADATA)
    assert (refusal.status, refusal.error, refusal.body) == (400, code.value,
                                                            {"error": code.value, "error_description": "static words"})
    assert "WWW-Authenticate" not in refusal.headers and refusal.headers["Cache-Control"] == "no-store"


def test_sign_in_required_is_the_bearer_challenge_with_resource_metadata() -> None:
    """ADR 0004 §7 [Q4]: 401 Bearer scope=..., resource_metadata=...; the code in the body."""
    error = ProtocolError(ErrorCode.SIGN_IN_REQUIRED, "this request needs a signed-in Session", scope="orders:read")
    refusal = delegated_refusal(error, resource_metadata=METADATA)
    assert refusal.status == 401 and refusal.body["error"] == "sign_in_required"
    assert refusal.headers["WWW-Authenticate"] == f'Bearer scope="orders:read", resource_metadata="{METADATA}"'


@pytest.mark.parametrize(
    ("scheme", "prefix"),
    [(None, 'Bearer error="invalid_token"'), ("DPoP", 'DPoP error="invalid_token"'),
     ("Bearer", 'Bearer error="invalid_token"')],
)
def test_token_failures_are_the_oauth_challenge_of_the_scheme(scheme: str | None, prefix: str) -> None:
    from frontdoor_protocol import ChallengeScheme

    refusal = delegated_refusal(ProtocolError(ErrorCode.INVALID_TOKEN, "no"), resource_metadata=METADATA,
                                scheme=ChallengeScheme(scheme) if scheme else None)
    assert refusal.status == 401 and refusal.headers["WWW-Authenticate"].startswith(prefix)
    assert f'resource_metadata="{METADATA}"' in refusal.headers["WWW-Authenticate"]


def test_a_wrong_proof_is_a_dpop_challenge_and_scope_is_403() -> None:
    proof = delegated_refusal(ProtocolError(ErrorCode.INVALID_DPOP_PROOF), resource_metadata=METADATA)
    assert proof.status == 401 and proof.headers["WWW-Authenticate"].startswith('DPoP error="invalid_dpop_proof"')
    scope = delegated_refusal(ProtocolError(ErrorCode.INSUFFICIENT_SCOPE, scope="orders:read"),
                              resource_metadata=METADATA)
    assert scope.status == 403 and 'scope="orders:read"' in scope.headers["WWW-Authenticate"]


def test_unavailable_is_503_with_retry_after() -> None:
    refusal = delegated_refusal(ProtocolError(ErrorCode.TEMPORARILY_UNAVAILABLE), resource_metadata=METADATA,
                                retry_after="7")
    assert (refusal.status, refusal.headers["Retry-After"]) == (503, "7")
    assert "WWW-Authenticate" not in refusal.headers


def test_strip_credentials_drops_every_credential_and_keeps_the_rest() -> None:
    headers = [("Poppy-Session", "eyJ.a.b"), ("authorization", "DPoP t"), ("DPoP", "p"), ("Cookie", "c=1"),
               ("Accept", "application/json"), ("X-Trace", "1"), ("x-trace", "2")]
    assert strip_credentials(headers) == [("Accept", "application/json"), ("X-Trace", "1"), ("x-trace", "2")]
    assert strip_credentials([(b"poppy-session", b"x"), (b"host", b"h")]) == [("host", "h")]
    assert strip_credentials(httpx.Headers({"POPPY-SESSION": "x", "Accept": "*/*"})) == [("accept", "*/*")]
    assert {"poppy-session", "authorization", "dpop", "cookie"} <= CREDENTIAL_HEADERS
