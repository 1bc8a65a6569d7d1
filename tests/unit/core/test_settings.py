"""Settings from the environment: defaults, durations, URL rules, errors naming the variable."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import msgspec
import pytest
from frontdoor_core.settings import ENV_NAMES, Settings, SettingsError, load_settings, parse_duration, settings_table

REPO_ROOT = Path(__file__).resolve().parents[3]
DURATION_FIELDS = [f.name for f in msgspec.structs.fields(Settings) if isinstance(f.default, timedelta)]
INT_FIELDS = [f.name for f in msgspec.structs.fields(Settings) if type(f.default) is int]
URL_VARS = ["FRONTDOOR_ISSUER_BASE_URL", "FRONTDOOR_CONSOLE_BASE_URL", "FRONTDOOR_LEDGER_BASE_URL"]
HTTPS_URLS = {
    "FRONTDOOR_ISSUER_BASE_URL": "https://issuer.example.com",
    "FRONTDOOR_CONSOLE_BASE_URL": "https://console.example.com",
    "FRONTDOOR_LEDGER_BASE_URL": "https://ledger.example.com",
}


def test_defaults() -> None:
    s = load_settings({})
    assert s == Settings()
    assert s.env == "dev" and s.is_dev
    assert s.database_url == "" and s.redis_url == "" and s.kek == ""
    assert s.issuer_base_url == "http://127.0.0.1:8001"
    assert s.console_base_url == "http://127.0.0.1:8000"
    assert s.dns_timeout == timedelta(seconds=5)
    assert s.domain_pending_window == timedelta(days=7)
    assert s.domain_pending_recheck == timedelta(minutes=15)
    assert s.domain_grace_period == timedelta(hours=72)
    assert s.session_lifetime == timedelta(hours=1)
    assert s.max_body_bytes == 65536
    assert s.log_format == "json" and s.log_level == "info"
    assert s.nameservers() is None and s.allowlist() == ()


def test_env_names_are_prefixed_except_the_conventional_ones() -> None:
    assert ENV_NAMES["database_url"] == "DATABASE_URL"
    assert ENV_NAMES["redis_url"] == "REDIS_URL"
    assert ENV_NAMES["otel_exporter_otlp_endpoint"] == "OTEL_EXPORTER_OTLP_ENDPOINT"
    assert ENV_NAMES["max_body_bytes"] == "FRONTDOOR_MAX_BODY_BYTES"
    others = {
        k: v for k, v in ENV_NAMES.items()
        if k not in {"database_url", "redis_url", "otel_exporter_otlp_endpoint", "stripe_api_key", "stripe_webhook_secret"}
    }
    assert ENV_NAMES["stripe_api_key"] == "STRIPE_API_KEY"  # Stripe's own conventional name
    assert ENV_NAMES["stripe_webhook_secret"] == "STRIPE_WEBHOOK_SECRET"
    assert all(v == "FRONTDOOR_" + k.upper() for k, v in others.items())
    assert set(ENV_NAMES) == {f.name for f in msgspec.structs.fields(Settings)}


def test_every_variable_is_read() -> None:
    s = load_settings(
        {
            "DATABASE_URL": "postgresql://db/x",
            "REDIS_URL": "redis://r/0",
            "FRONTDOOR_ENV": "test",
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://otel:4318",
            "FRONTDOOR_DB_POOL_MAX": "25",
            "FRONTDOOR_LOG_FORMAT": "console",
            "FRONTDOOR_NOT_A_SETTING": "ignored",
        }
    )
    assert (s.database_url, s.redis_url, s.env, s.otel_exporter_otlp_endpoint) == (
        "postgresql://db/x",
        "redis://r/0",
        "test",
        "http://otel:4318",
    )
    assert s.db_pool_max == 25 and s.log_format == "console" and s.is_dev


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("15m", timedelta(minutes=15)),
        ("72h", timedelta(hours=72)),
        ("7d", timedelta(days=7)),
        ("250ms", timedelta(milliseconds=250)),
        ("90", timedelta(seconds=90)),
        ("0", timedelta(0)),
        ("1.5h", timedelta(minutes=90)),
        (" 10s ", timedelta(seconds=10)),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected
    assert load_settings({"FRONTDOOR_DNS_TIMEOUT": text}).dns_timeout == expected


@pytest.mark.parametrize("field", DURATION_FIELDS)
def test_every_duration_variable_takes_a_duration(field: str) -> None:
    assert getattr(load_settings({ENV_NAMES[field]: "3h"}), field) == timedelta(hours=3)


@pytest.mark.parametrize("text", ["", "soon", "5 minutes", "-5s", "1w", "s", "10 s s", "1e3", "15M", "1h30m", "ms"])
def test_bad_duration_is_refused_naming_the_variable(text: str) -> None:
    with pytest.raises(SettingsError, match="not a duration"):
        parse_duration(text)
    with pytest.raises(SettingsError) as err:
        load_settings({"FRONTDOOR_DOMAIN_GRACE_PERIOD": text})
    assert str(err.value).startswith("FRONTDOOR_DOMAIN_GRACE_PERIOD: ")


@pytest.mark.parametrize("field", INT_FIELDS)
@pytest.mark.parametrize("text", ["ten", "1.5", "", "0x10"])
def test_bad_int_is_refused_naming_the_variable(field: str, text: str) -> None:
    with pytest.raises(SettingsError) as err:
        load_settings({ENV_NAMES[field]: text})
    assert str(err.value).startswith(ENV_NAMES[field] + ": "), str(err.value)


def test_ints_are_parsed() -> None:
    assert load_settings({"FRONTDOOR_MAX_BODY_BYTES": "1024"}).max_body_bytes == 1024


@pytest.mark.parametrize(("var", "value"), [("FRONTDOOR_ENV", "prod"), ("FRONTDOOR_LOG_FORMAT", "xml")])
def test_bad_choice_is_refused_naming_the_variable(var: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"^{var}: "):
        load_settings({var: value})


def test_production_accepts_https_urls() -> None:
    s = load_settings({"FRONTDOOR_ENV": "production", **HTTPS_URLS})
    assert s.env == "production" and not s.is_dev
    assert s.issuer_base_url == "https://issuer.example.com"


@pytest.mark.parametrize("var", URL_VARS)
@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "http://127.0.0.1:8001",
        "http://localhost:8000",
        "http://[::1]:8000",
        "ftp://example.com",
        "example.com",
        "https:///no-host",
    ],
)
def test_production_refuses_non_https_urls(var: str, url: str) -> None:
    with pytest.raises(SettingsError, match=f"^{var} must be an https:// URL"):
        load_settings({"FRONTDOOR_ENV": "production", **HTTPS_URLS, var: url})


@pytest.mark.parametrize("env", ["dev", "test"])
@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8001",
        "http://localhost:9000",
        "http://[::1]:8000",
        "https://issuer.example.com",
        "https://issuer.example.com/base",
    ],
)
def test_dev_allows_http_loopback(env: str, url: str) -> None:
    assert load_settings({"FRONTDOOR_ENV": env, "FRONTDOOR_ISSUER_BASE_URL": url}).issuer_base_url == url


@pytest.mark.parametrize("env", ["dev", "test"])
@pytest.mark.parametrize(
    "url",
    [
        "http://example.com",
        "http://10.0.0.5:8001",
        "http://127.0.0.1.example.com",
        "http://localhost.example.com",
        "ftp://127.0.0.1",
        "127.0.0.1:8001",
    ],
)
def test_dev_refuses_http_beyond_loopback(env: str, url: str) -> None:
    with pytest.raises(SettingsError, match=r"^FRONTDOOR_ISSUER_BASE_URL must be an https:// URL"):
        load_settings({"FRONTDOOR_ENV": env, "FRONTDOOR_ISSUER_BASE_URL": url})


@pytest.mark.parametrize("var", URL_VARS)
@pytest.mark.parametrize("env", ["dev", "production"])
@pytest.mark.parametrize("suffix", ["/", "/base/"])
def test_trailing_slash_is_refused(var: str, env: str, suffix: str) -> None:
    with pytest.raises(SettingsError, match=f"^{var} must not end with '/'"):
        load_settings({"FRONTDOOR_ENV": env, **HTTPS_URLS, var: HTTPS_URLS[var] + suffix})


def test_docs_base_url_is_empty_or_an_https_folder() -> None:
    """FRONTDOOR_DOCS_BASE_URL: findings link to {it}{page}#{anchor}, so it ends in '/'."""
    assert load_settings({}).docs_base_url == ""
    ok = "https://docs.example.com/frontdoor/docs/"
    assert load_settings({"FRONTDOOR_ENV": "production", **HTTPS_URLS, "FRONTDOOR_DOCS_BASE_URL": ok}).docs_base_url == ok
    for bad in ("https://docs.example.com/docs", "http://docs.example.com/docs/", "docs/"):
        with pytest.raises(SettingsError, match=r"^FRONTDOOR_DOCS_BASE_URL"):
            load_settings({"FRONTDOOR_ENV": "production", **HTTPS_URLS, "FRONTDOOR_DOCS_BASE_URL": bad})


def test_nameservers() -> None:
    s = load_settings({"FRONTDOOR_DNS_NAMESERVERS": "1.2.3.4:5353,[::1]:53,9.9.9.9"})
    assert s.nameservers() == [("1.2.3.4", 5353), ("::1", 53), ("9.9.9.9", 53)]
    s = load_settings({"FRONTDOOR_DNS_NAMESERVERS": " 127.0.0.1:5300 , ,[2001:db8::1]:5353 "})
    assert s.nameservers() == [("127.0.0.1", 5300), ("2001:db8::1", 5353)]
    assert load_settings({"FRONTDOOR_DNS_NAMESERVERS": "  "}).nameservers() is None


def test_allowlist() -> None:
    s = load_settings({"FRONTDOOR_OUTBOUND_ALLOWLIST": "127.0.0.0/8, internal.example ,,::1/128"})
    assert s.allowlist() == ("127.0.0.0/8", "internal.example", "::1/128")


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("FRONTDOOR_DNS_NAMESERVERS", "1.2.3.4:dns"),
        ("FRONTDOOR_LOG_LEVEL", "verbose"),
    ],
)
def test_values_that_would_fail_later_are_refused_at_load(var: str, value: str) -> None:
    with pytest.raises(SettingsError, match=f"^{var}"):
        load_settings({var: value})


def test_settings_table_lists_every_variable() -> None:
    table = settings_table()
    for var in ENV_NAMES.values():
        assert f"`{var}`" in table
    assert "| `FRONTDOOR_DOMAIN_GRACE_PERIOD` | `3d` |" in table


def test_readme_documents_every_variable() -> None:
    """The README at the repository root names every environment variable the code reads."""
    readme = REPO_ROOT / "README.md"
    assert readme.is_file(), f"{readme} is missing"
    text = readme.read_text("utf-8")
    missing = [var for var in ENV_NAMES.values() if not re.search(rf"(?<![A-Z0-9_]){var}(?![A-Z0-9_])", text)]
    assert not missing, f"README.md does not mention: {missing}"


def test_readme_table_is_generated_from_the_settings() -> None:
    """The README's configuration table is exactly settings_table() (scripts/settings_table.py)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    done = subprocess.run([sys.executable, str(root / "scripts" / "settings_table.py"), "--check"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout


def test_the_webhook_allowlist_is_separate_from_the_outbound_one() -> None:
    from frontdoor_dispatcher.worker_runtime import delivery_outbound_policy

    s = load_settings({"FRONTDOOR_OUTBOUND_ALLOWLIST": "10.0.0.0/8"})
    assert s.allowlist() == ("10.0.0.0/8",) and s.webhook_allowlist_entries() == ()
    # deliveries do not inherit the agent-fetch allowlist
    assert delivery_outbound_policy(s).allowlist == ()
    s = load_settings({"FRONTDOOR_WEBHOOK_ALLOWLIST": "10.1.0.0/16, hooks.internal"})
    assert delivery_outbound_policy(s).allowlist == ("10.1.0.0/16", "hooks.internal")
    assert s.allowlist() == ()
    with pytest.raises(SettingsError, match="FRONTDOOR_WEBHOOK_ALLOWLIST"):
        load_settings({"FRONTDOOR_WEBHOOK_ALLOWLIST": "https://not-an-entry/"})


def test_db_pool_init_defaults_to_the_default_maximum_and_reads_its_variable() -> None:
    """`FRONTDOOR_DB_POOL_INIT` (issue #13 §4): a process opens its whole default pool at start."""
    default = load_settings({})
    assert (default.db_pool_min, default.db_pool_init, default.db_pool_max) == (1, 10, 10)
    assert load_settings({"FRONTDOOR_DB_POOL_INIT": "0"}).db_pool_init == 0
    assert ENV_NAMES["db_pool_init"] == "FRONTDOOR_DB_POOL_INIT"
