"""validate_client_metadata: every rule of PAP §4.1 for the Client ID Metadata Document."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import personal_agent_protocol
import pytest
from frontdoor_identity import (
    ClientMetadata,
    InvalidClientMetadata,
    ResolutionReason,
    check_client_id,
    validate_client_metadata,
)

FIXTURES = Path(personal_agent_protocol.__file__).parent / "protocol" / "fixtures"
VALID: dict[str, Any] = json.loads((FIXTURES / "client-metadata-valid.json").read_text())
CLIENT_ID = VALID["client_id"]
R = ResolutionReason


def doc(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is ...:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def refused(document: object, client_id: str = CLIENT_ID, *, dev: bool = False) -> InvalidClientMetadata:
    with pytest.raises(InvalidClientMetadata) as caught:
        validate_client_metadata(document, client_id, allow_http_loopback=dev)
    assert caught.value.stage in ("client_id", "client_metadata")
    return caught.value


def test_the_protocol_fixture_is_accepted_with_its_extensions() -> None:
    metadata = validate_client_metadata(VALID, CLIENT_ID, allow_http_loopback=False)

    assert metadata == ClientMetadata(
        client_id="https://agent.example/agent.json",
        client_name="Example Agent",
        jwks_uri="https://agent.example/jwks.json",
        redirect_uris=("https://agent.example/oauth/callback",),
        logo_uri="https://agent.example/logo.png",
        auth_method_declared=True,  # the fixture names private_key_jwt ([S §3] for 1.0 sign-in)
        extensions=metadata.extensions,
    )
    assert metadata.extension_version("operations") == "1"
    assert metadata.extension_version("example.org/preferences") == "2"
    assert metadata.extension_version("gift-wrap") is None


@pytest.mark.parametrize(
    "client_id",
    [
        "http://agent.example/agent.json",
        "agent.example/agent.json",
        "https://user:pw@agent.example/agent.json",
        "https://agent.example/agent.json#frag",
        "https:///agent.json",
        "https://agent.example/" + "a" * 2100,
        "https://agent.example/a b",
    ],
)
def test_pap_4_1_01_client_id_must_be_an_https_url(client_id: str) -> None:
    error = refused(doc(client_id=client_id), client_id)
    assert (error.reason, error.stage, error.requirement) == (R.INVALID_CLIENT_ID, "client_id", "PAP-4.1-01")


def test_pap_4_1_01_a_non_string_client_id_is_refused() -> None:
    with pytest.raises(InvalidClientMetadata) as caught:
        check_client_id(42)
    assert caught.value.reason is R.INVALID_CLIENT_ID


def test_pap_4_1_02_the_document_client_id_must_equal_the_url_exactly() -> None:
    assert refused(doc(client_id="https://agent.example/other.json")).reason is R.CLIENT_ID_MISMATCH
    # No normalisation: case, trailing slash or default port make another URL.
    assert refused(doc(client_id="https://AGENT.example/agent.json")).reason is R.CLIENT_ID_MISMATCH
    assert refused(doc(client_id="https://agent.example:443/agent.json")).reason is R.CLIENT_ID_MISMATCH
    error = refused(doc(client_id="https://attacker.example/agent.json"))
    assert (error.reason, error.requirement) == (R.CLIENT_ID_MISMATCH, "PAP-4.1-02")


def test_pap_4_1_02_client_id_missing_or_not_a_string() -> None:
    assert refused(doc(client_id=...)).reason is R.MISSING_FIELD
    assert refused(doc(client_id=["https://agent.example/agent.json"])).reason is R.INVALID_FIELD


@pytest.mark.parametrize("document", [[VALID], "x", None, 1])
def test_the_document_must_be_an_object(document: object) -> None:
    assert refused(document).reason is R.NOT_OBJECT


@pytest.mark.parametrize(
    ("jwks_uri", "reason"),
    [
        ("http://agent.example/jwks.json", R.JWKS_URI_NOT_HTTPS),
        ("https://agent.example/jwks.json#k", R.JWKS_URI_NOT_HTTPS),
        (["https://agent.example/jwks.json"], R.JWKS_URI_NOT_HTTPS),
        ("https://keys.agent.example/jwks.json", R.JWKS_URI_OTHER_DOMAIN),
        ("https://example/jwks.json", R.JWKS_URI_OTHER_DOMAIN),
        ("https://agent.example.evil.test/jwks.json", R.JWKS_URI_OTHER_DOMAIN),
        ("https://www.agent.example/jwks.json", R.JWKS_URI_OTHER_DOMAIN),
    ],
)
def test_pap_4_1_03_jwks_uri_is_https_on_the_client_id_host(jwks_uri: object, reason: ResolutionReason) -> None:
    error = refused(doc(jwks_uri=jwks_uri))
    assert (error.reason, error.requirement) == (reason, "PAP-4.1-03")


def test_pap_4_1_03_jwks_uri_is_required() -> None:
    error = refused(doc(jwks_uri=...))
    assert (error.reason, error.requirement) == (R.MISSING_FIELD, "PAP-4.1-03")


def test_pap_4_1_03_same_host_ignores_ascii_case_and_port() -> None:
    metadata = validate_client_metadata(
        doc(jwks_uri="https://Agent.Example:8443/jwks.json", redirect_uris=["https://AGENT.example/cb"]),
        CLIENT_ID,
        allow_http_loopback=False,
    )
    assert metadata.jwks_uri == "https://Agent.Example:8443/jwks.json"


def test_pap_4_1_03_idn_hosts_compare_in_their_ascii_form() -> None:
    client_id = "https://bücher.example/agent.json"
    document = doc(client_id=client_id, jwks_uri="https://xn--bcher-kva.example/jwks.json", redirect_uris=[])
    assert validate_client_metadata(document, client_id, allow_http_loopback=False).client_id == client_id


@pytest.mark.parametrize(
    ("redirect_uris", "reason"),
    [
        (["http://agent.example/cb"], R.REDIRECT_URI_NOT_HTTPS),
        (["https://agent.example/cb", "https://other.example/cb"], R.REDIRECT_URI_OTHER_DOMAIN),
        (["https://agent.example/cb#x"], R.REDIRECT_URI_NOT_HTTPS),
        ([7], R.REDIRECT_URI_NOT_HTTPS),
        ("https://agent.example/cb", R.INVALID_FIELD),
    ],
)
def test_pap_4_1_03_every_redirect_uri_is_https_on_the_client_id_host(
    redirect_uris: object, reason: ResolutionReason
) -> None:
    error = refused(doc(redirect_uris=redirect_uris))
    assert (error.reason, error.requirement) == (reason, "PAP-4.1-03")


def test_redirect_uris_may_be_absent() -> None:
    assert validate_client_metadata(doc(redirect_uris=...), CLIENT_ID, allow_http_loopback=False).redirect_uris == ()


def test_pap_3_05_a_logo_uri_must_be_https() -> None:
    error = refused(doc(logo_uri="http://agent.example/logo.png"))
    assert (error.reason, error.requirement) == (R.LOGO_URI_NOT_HTTPS, "PAP-3-05")
    # Not a security URL: another host is fine, and it may be absent.
    assert validate_client_metadata(doc(logo_uri="https://cdn.example/l.png"), CLIENT_ID, allow_http_loopback=False)
    assert validate_client_metadata(doc(logo_uri=...), CLIENT_ID, allow_http_loopback=False).logo_uri is None


@pytest.mark.parametrize("name", [..., "", "   ", 3, "x" * 201, "bad\x00name", "line\nbreak"])
def test_client_name_is_required_printable_and_bounded(name: object) -> None:
    assert refused(doc(client_name=name)).reason in (R.MISSING_FIELD, R.INVALID_FIELD)


def test_only_private_key_jwt_client_authentication() -> None:
    assert refused(doc(token_endpoint_auth_method="client_secret_basic")).reason is R.UNSUPPORTED_AUTH_METHOD
    assert refused(doc(token_endpoint_auth_method="none")).reason is R.UNSUPPORTED_AUTH_METHOD
    assert validate_client_metadata(doc(token_endpoint_auth_method=...), CLIENT_ID, allow_http_loopback=False)


def test_guide_jwt_03_an_embedded_jwks_is_ignored_never_used() -> None:
    document = doc(jwks={"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})
    metadata = validate_client_metadata(document, CLIENT_ID, allow_http_loopback=False)
    assert not hasattr(metadata, "jwks")
    assert metadata.jwks_uri == "https://agent.example/jwks.json"


def test_pap_3_3_03_unknown_members_and_unusable_extensions_are_ignored() -> None:
    document = doc(
        software_id="x",
        extensions={
            "operations": {"version": "1", "extra": True},
            "not a name": {"version": "1"},
            "example.org/no-version": {},
            "example.org/bad-version": {"version": "v2"},
            "example.org/not-object": "1",
        },
    )
    metadata = validate_client_metadata(document, CLIENT_ID, allow_http_loopback=False)
    assert dict(metadata.extensions).keys() == {"operations"}


def test_extensions_must_be_an_object_when_present() -> None:
    assert refused(doc(extensions=["operations"])).reason is R.INVALID_FIELD
    assert validate_client_metadata(doc(extensions=...), CLIENT_ID, allow_http_loopback=False).extensions == {}


def test_dev_mode_accepts_plain_http_on_loopback_only() -> None:
    client_id = "http://127.0.0.1:8001/agent.json"
    document = doc(
        client_id=client_id,
        jwks_uri="http://127.0.0.1:8001/jwks.json",
        redirect_uris=["http://127.0.0.1:8001/cb"],
        logo_uri="http://127.0.0.1:8001/logo.png",
    )
    assert validate_client_metadata(document, client_id, allow_http_loopback=True).client_id == client_id
    assert refused(document, client_id).reason is R.INVALID_CLIENT_ID  # production refuses it
    public = doc(client_id="http://agent.example/agent.json")
    assert refused(public, "http://agent.example/agent.json", dev=True).reason is R.INVALID_CLIENT_ID
    localhost = "http://localhost:8001/agent.json"
    mixed = doc(client_id=localhost, jwks_uri="http://127.0.0.1:8001/jwks.json", redirect_uris=[])
    assert refused(mixed, localhost, dev=True).reason is R.JWKS_URI_OTHER_DOMAIN
