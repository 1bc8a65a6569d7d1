"""The dev-mode warning: loud at every start outside production, naming an unset FRONTDOOR_ENV."""

from __future__ import annotations

import pytest
from frontdoor_core.dev_mode import warn_if_dev_mode
from frontdoor_core.settings import load_settings
from structlog.testing import capture_logs

HTTPS = {"FRONTDOOR_ISSUER_BASE_URL": "https://id.example", "FRONTDOOR_CONSOLE_BASE_URL": "https://console.example",
         "FRONTDOOR_LEDGER_BASE_URL": "https://ledger.example"}


def test_an_unset_env_is_dev_and_says_so() -> None:
    settings = load_settings({})
    assert settings.env == "dev"
    with capture_logs() as logs:
        assert warn_if_dev_mode(settings, "issuer", {})
    assert len(logs) == 1
    (line,) = logs
    assert (line["log_level"], line["event"], line["service"], line["env"], line["env_set"]) == (
        "warning", "dev_mode", "issuer", "dev", False)
    assert "FRONTDOOR_ENV is not set" in line["detail"] and "FRONTDOOR_ENV=production" in line["detail"]


@pytest.mark.parametrize("env", ["dev", "test"])
def test_an_explicit_dev_or_test_env_still_warns(env: str) -> None:
    environ = {"FRONTDOOR_ENV": env}
    with capture_logs() as logs:
        assert warn_if_dev_mode(load_settings(environ), "relay", environ)
    assert [(x["event"], x["env"], x["env_set"]) for x in logs] == [("dev_mode", env, True)]
    assert f"FRONTDOOR_ENV={env}:" in logs[0]["detail"]


def test_production_is_quiet() -> None:
    environ = {"FRONTDOOR_ENV": "production", **HTTPS}
    with capture_logs() as logs:
        assert not warn_if_dev_mode(load_settings(environ), "console", environ)
    assert logs == []
