"""The ``protocol`` issuer setting: which PAP profiles a tenant serves and publishes (ADR 0004 §1)."""

from __future__ import annotations

import msgspec
import pytest
from frontdoor_core.errors import Invalid
from frontdoor_tenancy.issuer_settings import IssuerSettings, ProtocolSettings, default_settings, validate_settings


def test_new_tenants_serve_both_and_publish_0_2() -> None:
    s = default_settings("Acme")
    assert s.protocol.served == ["0.2", "1.0"] and s.protocol.published == "0.2"
    assert validate_settings(s).protocol == s.protocol


def test_settings_stored_before_1_0_decode_as_0_2_only() -> None:
    """Rows written before the setting existed keep serving what they served (ADR 0004 §1)."""
    old = msgspec.convert({"organization_name": "Old Co", "website": True}, IssuerSettings)
    assert old.protocol.served == ["0.2"] and old.protocol.published == "0.2"
    assert not old.protocol.serves("1.0")


@pytest.mark.parametrize(("served", "published", "field"), [
    ([], "0.2", "protocol.served"),
    (["1.0"], "0.2", "protocol.published"),
    (["0.2"], "1.0", "protocol.published"),
])
def test_published_must_be_served_and_served_non_empty(served: list[str], published: str, field: str) -> None:
    s = IssuerSettings(organization_name="Acme", protocol=ProtocolSettings(served=served, published=published))  # type: ignore[arg-type]
    with pytest.raises(Invalid) as exc:
        validate_settings(s)
    assert field in exc.value.fields


def test_served_is_normalised_and_unknown_versions_are_refused() -> None:
    s = IssuerSettings(organization_name="Acme", protocol=ProtocolSettings(served=["1.0", "0.2", "1.0"], published="1.0"))
    assert validate_settings(s).protocol.served == ["0.2", "1.0"]
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"organization_name": "A", "protocol": {"served": ["0.3"], "published": "0.3"}}, IssuerSettings)
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert({"organization_name": "A", "protocol": {"served": ["0.2"], "extra": 1}}, IssuerSettings)
