"""RFC 8252 §7.3 loopback redirect URIs for PAP 1.0 Direct Sign-In ([S §3]): what counts as
one, what matches (any port, nothing else), and how a Client ID Metadata Document keeps
them apart from the HTTPS redirect_uris 0.2 matches exactly (PAP-4.5-01)."""

from __future__ import annotations

import pytest
from frontdoor_identity import is_loopback_redirect, loopback_redirect_matches, validate_client_metadata


@pytest.mark.parametrize(("uri", "expected"), [
    ("http://127.0.0.1/cb", True),
    ("http://127.0.0.1:8765/cb", True),
    ("http://[::1]:51004/cb?x=1", True),
    ("http://127.0.0.1", True),
    ("http://localhost:8765/cb", False),  # RFC 8252 §8.3: not localhost
    ("https://127.0.0.1:8765/cb", False),
    ("http://127.0.0.2/cb", False),
    ("http://127.0.0.1:99999/cb", False),
    ("http://127.0.0.1:8765/cb#frag", False),
    ("http://user@127.0.0.1/cb", False),
    (7, False),
])
def test_what_is_a_loopback_redirect(uri: object, expected: bool) -> None:
    assert is_loopback_redirect(uri) is expected


def test_any_port_matches_but_nothing_else_differs() -> None:
    registered = ["http://127.0.0.1/callback", "http://[::1]:9000/cb"]
    assert loopback_redirect_matches("http://127.0.0.1:51234/callback", registered)
    assert loopback_redirect_matches("http://127.0.0.1/callback", registered)
    assert loopback_redirect_matches("http://[::1]:1/cb", registered)
    assert not loopback_redirect_matches("http://127.0.0.1:51234/callback/x", registered)
    assert not loopback_redirect_matches("http://[::1]:51234/callback", registered)  # other literal
    assert not loopback_redirect_matches("http://127.0.0.1:51234/cb", registered)
    assert not loopback_redirect_matches("http://127.0.0.1:51234/callback?x=1", registered)
    assert not loopback_redirect_matches("https://agent.example/callback", registered)


def test_the_document_keeps_loopback_uris_apart() -> None:
    client_id = "https://agent.example/agent.json"
    doc = {"client_id": client_id, "client_name": "Agent", "jwks_uri": "https://agent.example/jwks.json",
           "redirect_uris": ["https://agent.example/cb", "http://127.0.0.1/cb"]}
    metadata = validate_client_metadata(doc, client_id, allow_http_loopback=False)
    assert metadata.redirect_uris == ("https://agent.example/cb",)
    assert metadata.loopback_redirect_uris == ("http://127.0.0.1/cb",)
    assert metadata.auth_method_declared is False
    declared = validate_client_metadata({**doc, "token_endpoint_auth_method": "private_key_jwt"}, client_id, allow_http_loopback=False)
    assert declared.auth_method_declared is True
