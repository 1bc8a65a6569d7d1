"""``make run``: each public base URL follows its moved port unless it is set explicitly."""

from __future__ import annotations

from frontdoor_core.settings import load_settings
from frontdoor_devstack.run import derived_base_urls

PORTS = {"FRONTDOOR_CONSOLE_PORT": "9100", "FRONTDOOR_ISSUER_PORT": "9101", "FRONTDOOR_LEDGER_PORT": "9102",
         "FRONTDOOR_EXAMPLE_PORT": "9103"}


def test_moved_ports_move_the_base_urls() -> None:
    environ = {"FRONTDOOR_ENV": "dev", **PORTS}
    derived = derived_base_urls(environ, load_settings(environ))
    assert derived == {"FRONTDOOR_CONSOLE_BASE_URL": "http://127.0.0.1:9100",
                       "FRONTDOOR_ISSUER_BASE_URL": "http://127.0.0.1:9101",
                       "FRONTDOOR_LEDGER_BASE_URL": "http://127.0.0.1:9102"}
    settings = load_settings({**environ, **derived})
    assert (settings.console_base_url, settings.issuer_base_url, settings.ledger_base_url) == (
        "http://127.0.0.1:9100", "http://127.0.0.1:9101", "http://127.0.0.1:9102")


def test_default_ports_keep_the_default_urls() -> None:
    derived = derived_base_urls({}, load_settings({}))
    assert derived == {"FRONTDOOR_CONSOLE_BASE_URL": "http://127.0.0.1:8000",
                       "FRONTDOOR_ISSUER_BASE_URL": "http://127.0.0.1:8001",
                       "FRONTDOOR_LEDGER_BASE_URL": "http://127.0.0.1:8002"}


def test_an_explicit_base_url_is_kept() -> None:
    environ = {**PORTS, "FRONTDOOR_ISSUER_BASE_URL": "https://id.dev.example"}
    derived = derived_base_urls(environ, load_settings(environ))
    assert "FRONTDOOR_ISSUER_BASE_URL" not in derived
    assert derived["FRONTDOOR_CONSOLE_BASE_URL"] == "http://127.0.0.1:9100"


def test_production_derives_nothing() -> None:
    environ = {"FRONTDOOR_ENV": "production", **PORTS, "FRONTDOOR_ISSUER_BASE_URL": "https://id.example",
               "FRONTDOOR_CONSOLE_BASE_URL": "https://console.example", "FRONTDOOR_LEDGER_BASE_URL": "https://l.example"}
    assert derived_base_urls(environ, load_settings(environ)) == {}
