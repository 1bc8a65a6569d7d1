"""Settings: read from the environment once, at start-up, into a msgspec struct.

Every field is documented with ``msgspec.Meta(description=...)``; ``settings_table()``
renders those descriptions as the README's configuration table, and a unit test keeps
the two in step.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec

from .outbound import AddressRules, OutboundPolicy

__all__ = [
    "ENV_NAMES",
    "Settings",
    "SettingsError",
    "load_settings",
    "parse_duration",
    "settings_table",
]

Env = Literal["dev", "test", "production"]


class SettingsError(ValueError):
    """The environment does not describe a valid configuration."""


def _doc(text: str) -> msgspec.Meta:
    return msgspec.Meta(description=text)


class Settings(msgspec.Struct, frozen=True, kw_only=True):
    """Frontdoor's configuration. Each service reads the fields it needs."""

    env: Annotated[Env, _doc("`dev` allows plain `http://` loopback URLs, and every service logs a `dev_mode` WARNING at each start (saying also when the variable is unset); `test` is dev for the test suite; `production` refuses any non-HTTPS public URL. Unset means `dev`: deployments set `production` (the container images do).")] = "dev"
    database_url: Annotated[str, _doc("PostgreSQL URL. Empty: `make run` / `make test` start an embedded server under the data directory.")] = ""
    redis_url: Annotated[str, _doc("Redis URL (`redis://`, `rediss://` or `unix://`). Empty: an embedded `redis-server` is started.")] = ""
    redis_cluster: Annotated[bool, _doc("`1`: `REDIS_URL` names one node of a Redis Cluster (`redis://` or `rediss://`, database 0) and the services use a cluster client, which finds the other nodes and follows the slots. Celery's broker cannot be a cluster: set `FRONTDOOR_CELERY_BROKER_URL` to a single Redis too. `0`: a single Redis (or one behind Sentinel or a proxy).")] = False
    celery_broker_url: Annotated[str, _doc("The Celery broker of the workers and beat, a single Redis (`redis://`, `rediss://` or `unix://`; never a cluster). Empty: `REDIS_URL`. Required with `FRONTDOOR_REDIS_CLUSTER=1`.")] = ""
    data_dir: Annotated[str, _doc("Where the embedded servers, the dev KEK and logs live. Reused by the next run.")] = "./.data"
    kek: Annotated[str, _doc("Key-encryption key for secrets at rest: base64url of 32 random bytes; several comma-separated during rotation, the current one first. `make run` generates one into the data directory.")] = ""
    issuer_base_url: Annotated[str, _doc("Public base URL of the issuer service; a tenant's issuer is `{this}/{slug}`. Unset under `make run` in dev: `http://127.0.0.1:{FRONTDOOR_ISSUER_PORT}`.")] = "http://127.0.0.1:8001"
    console_base_url: Annotated[str, _doc("Public base URL of the console (dashboard and management API). Unset under `make run` in dev: `http://127.0.0.1:{FRONTDOOR_CONSOLE_PORT}`.")] = "http://127.0.0.1:8000"
    ledger_base_url: Annotated[str, _doc("Public base URL of the ledger service (the operations endpoint agents call). Unset under `make run` in dev: `http://127.0.0.1:{FRONTDOOR_LEDGER_PORT}`.")] = "http://127.0.0.1:8002"
    dns_nameservers: Annotated[str, _doc("Comma-separated `host:port` nameservers for domain verification. Empty: the system resolver.")] = ""
    dns_timeout: Annotated[timedelta, _doc("Lifetime of one DNS TXT lookup.")] = timedelta(seconds=5)
    domain_pending_window: Annotated[timedelta, _doc("How long an unverified claim is re-checked before it is `failed`.")] = timedelta(days=7)
    domain_pending_recheck: Annotated[timedelta, _doc("Interval between scheduled checks of pending claims.")] = timedelta(minutes=15)
    domain_recheck_interval: Annotated[timedelta, _doc("Interval between scheduled checks of verified and suspended domains.")] = timedelta(days=1)
    domain_grace_period: Annotated[timedelta, _doc("How long a verified domain's record may be missing before the domain is `suspended`.")] = timedelta(hours=72)
    domain_sweep_interval: Annotated[timedelta, _doc("How often the worker looks for domains due a check.")] = timedelta(minutes=1)
    session_lifetime: Annotated[timedelta, _doc("Default Session Token lifetime for new tenants (hours, not days).")] = timedelta(hours=1)
    key_publish_lead: Annotated[timedelta, _doc("A rotated signing key is published this long before it signs anything.")] = timedelta(minutes=10)
    trusted_proxies: Annotated[str, _doc("Comma-separated CIDRs of the reverse proxies in front of the services; their X-Forwarded-For then names the client for rate limits. Empty: the TCP peer is the client.")] = ""
    outbound_allowlist: Annotated[str, _doc("Comma-separated CIDRs or host names the SSRF-safe client may reach although they are not public, for Frontdoor's own fetches (agent metadata and JWKS, publish checks; tests, private deployments). Never applies to tenant webhooks: see `FRONTDOOR_WEBHOOK_ALLOWLIST`.")] = ""
    webhook_allowlist: Annotated[str, _doc("Comma-separated CIDRs or host names tenant webhook endpoints may be registered at and delivered to although they are not public (tests, private deployments). Empty: webhooks reach public addresses only (plus loopback `http://` in dev).")] = ""
    scanner_allowlist: Annotated[str, _doc("Comma-separated CIDRs or host names the public domain scanner (`/scan`) may reach although they are not public. Empty (the default, and the only safe value in production): the scanner reaches public addresses only, never loopback or private ones, whatever `FRONTDOOR_OUTBOUND_ALLOWLIST` says. For tests.")] = ""
    scanner_rate_limit: Annotated[int, _doc("Fresh scans the public domain scanner runs per client network (an IPv4 address, or an IPv6 /64) per hour; cached results do not count.")] = 20
    scanner_target_rate_limit: Annotated[int, _doc("Requests the public domain scanner sends to one host per minute, all scans and clients together, so it cannot be used to flood a third party.")] = 30
    scanner_cache_ttl: Annotated[timedelta, _doc("How long a scan result is kept (in Redis) and served to anyone opening the same `/scan/{domain}` before the domain is fetched again.")] = timedelta(minutes=5)
    docs_base_url: Annotated[str, _doc("Where this repository's `docs/` are published, ending in `/` (for example your code host's view of the `docs/` folder): the public scanner's and the agent simulator's findings link to `{this}scanner.md#cache-disabled` and the like. The console does not serve the docs itself; empty (the default) names the page (`docs/scanner.md#cache-disabled`) without a link, so no finding ever links to a page that is not there.")] = ""
    console_port: Annotated[int, _doc("`make run`: console port on 127.0.0.1 (and its base URL, unless `FRONTDOOR_CONSOLE_BASE_URL` is set).")] = 8000
    issuer_port: Annotated[int, _doc("`make run`: issuer port (and its base URL, unless `FRONTDOOR_ISSUER_BASE_URL` is set).")] = 8001
    ledger_port: Annotated[int, _doc("`make run`: ledger port (and its base URL, unless `FRONTDOOR_LEDGER_BASE_URL` is set).")] = 8002
    example_port: Annotated[int, _doc("`make run`: the example company (Northwind) port.")] = 8003
    issuer_workers: Annotated[int, _doc("Worker processes of the issuer under granian (`make run`, the container image, so the Helm chart and compose too). 0: one per CPU the process may use (its CPU affinity, capped by a cgroup CPU quota such as a Kubernetes CPU limit). Everything a request relies on across workers lives in PostgreSQL or Redis (replay claims, rate limits, codes) or is stateless (DPoP nonces); each worker keeps its own short caches (tenants, signing keys, agent metadata).")] = 0
    ledger_workers: Annotated[int, _doc("Worker processes of the ledger under granian (`make run`, the container image, so the Helm chart and compose too). 0: one per CPU the process may use (its CPU affinity, capped by a cgroup CPU quota such as a Kubernetes CPU limit). Everything a confirm relies on across workers lives in PostgreSQL or Redis (the compare-and-set, the perform lease, rate limits, DPoP `jti` claims, the settled-outcome and conversation wake-ups on Redis channels); each worker keeps its own short caches (tenants, conversation settings, agent metadata, verified signatures).")] = 0
    db_pool_min: Annotated[int, _doc("Minimum PostgreSQL connections per process.")] = 1
    db_pool_max: Annotated[int, _doc("Maximum PostgreSQL connections per process.")] = 10
    db_pool_init: Annotated[int, _doc("PostgreSQL connections the console, the issuer and the ledger open at start-up, before they serve (so before `/readyz` answers 200), capped at `FRONTDOOR_DB_POOL_MAX`. A process restarted under load (a rolling restart, a new replica) then takes its first burst without opening them one request at a time; those above `FRONTDOOR_DB_POOL_MIN` close after 5 minutes idle. Best effort: what cannot be opened (PostgreSQL's `max_connections` reached) is logged (`db_pool_init_partial`) and opened on demand as before. Adds no connection to the budget, which `FRONTDOOR_DB_POOL_MAX` per worker sets (docs/scaling.md). 0: only `FRONTDOOR_DB_POOL_MIN`.")] = 10
    log_level: Annotated[Literal["debug", "info", "warning", "error"], _doc("Log level (`debug`, `info`, `warning`, `error`).")] = "info"
    log_format: Annotated[Literal["json", "console"], _doc("`json` (one object per line) or `console` (coloured, for humans).")] = "json"
    otel_exporter_otlp_endpoint: Annotated[str, _doc("OTLP/HTTP endpoint for traces. Empty: spans are created but not exported.")] = ""
    metrics_port: Annotated[int, _doc("Port of the internal listener serving Prometheus `/metrics` (every interface, apart from the public app; keep it off the Service and Ingress). 0: no listener. Several granian workers: also set `PROMETHEUS_MULTIPROC_DIR`.")] = 0
    signup_rate_limit: Annotated[int, _doc("Sign-ups allowed per client network per hour (an IPv4 address, or an IPv6 /64).")] = 10
    login_rate_limit: Annotated[int, _doc("Login attempts allowed per email per 15 minutes (however it is spelt: case, spaces, trailing dots, fullwidth forms and IDNA are normalised first).")] = 10
    login_network_rate_limit: Annotated[int, _doc("Login and invitation attempts allowed per client network (an IPv4 address, or an IPv6 /64) per 15 minutes (all emails together).")] = 50
    cookie_idle_timeout: Annotated[timedelta, _doc("Admin browser sessions expire after this long idle.")] = timedelta(hours=2)
    max_body_bytes: Annotated[int, _doc("Largest request body any JSON API accepts.")] = 65536
    confirm_wait: Annotated[timedelta, _doc("How long a confirm request waits for the perform webhook's outcome before answering `in_progress` with `Retry-After`.")] = timedelta(seconds=3)
    operation_retry_after: Annotated[int, _doc("`Retry-After` seconds on an operation `in_progress`.")] = 2
    conversation_reply_wait: Annotated[timedelta, _doc("How long a hosted conversation's message request waits for the first delivery of its `conversation.message.created` webhook (the company agent's reply) before answering `working`.")] = timedelta(seconds=5)
    conversation_stream_duration: Annotated[timedelta, _doc("How long a hosted conversation's event stream (SSE) stays open before it ends and the agent reconnects with `Last-Event-ID`; 0 ends it once the backlog is sent.")] = timedelta(minutes=5)
    webhook_timeout: Annotated[timedelta, _doc("Timeout of one webhook delivery attempt (connect to last byte).")] = timedelta(seconds=15)
    webhook_lease_margin: Annotated[timedelta, _doc("How much longer than the timeout a claimed webhook message stays reserved to its sender; after a crash it is retried once this lease ends.")] = timedelta(seconds=30)
    webhook_retry_schedule: Annotated[str, _doc("Comma-separated delays before each delivery attempt, the first attempt included; a message is exhausted after the last.")] = "0s,5s,5m,30m,2h,5h,10h,10h"
    webhook_retry_jitter: Annotated[float, _doc("Each retry delay is spread by up to this fraction either way.")] = 0.1
    webhook_retry_after_max: Annotated[timedelta, _doc("The longest receiver `Retry-After` honoured; longer ones are capped.")] = timedelta(hours=1)
    webhook_retention: Annotated[timedelta, _doc("How long delivered and exhausted messages keep their payload and attempts before they are pruned; forwarded outbox events are pruned after the same period.")] = timedelta(days=30)
    webhook_attempts_retention: Annotated[timedelta, _doc("Webhook delivery attempts are stored in monthly partitions; a month's partition is dropped once the month ended longer ago than this (the dispatcher's daily `frontdoor.retention.partitions`, which also creates the next three months). Keep it above `FRONTDOOR_WEBHOOK_RETENTION` plus the retry schedule: a message still kept loses the attempts of a dropped month.")] = timedelta(days=60)
    audit_retention: Annotated[timedelta, _doc("How long audit log entries are kept; older ones are deleted oldest first, in chunks, by the dispatcher's hourly `frontdoor.retention.audit`.")] = timedelta(days=400)
    session_retention: Annotated[timedelta, _doc("How long a Session row is kept after its last activity (it ended, or, live, was last renewed) and a sign-in attempt after it ended; a live Session idle this long can no longer be renewed (`invalid_session`). Deleted oldest first, in chunks, by the dispatcher's hourly `frontdoor.retention.sessions`, once the agent funnel and billing have counted their days. `0s`: kept forever, no idle bound.")] = timedelta(days=90)
    operation_retention: Annotated[timedelta, _doc("How long a final operation (succeeded, failed, cancelled, expired) is kept after it finished, with its revisions and perform messages; proposals and operations in progress are never deleted. Deleted oldest first, in chunks, by the dispatcher's hourly `frontdoor.retention.operations`, once the agent funnel and billing have counted their days; reading a deleted one answers 404 `operation_not_found`. Default: the audit log's, so an audit entry's operation can be looked up as long as the entry is kept (ADR 0007). `0s`: kept forever.")] = timedelta(days=400)
    webhook_disable_after: Annotated[timedelta, _doc("An endpoint whose every attempt failed for this long is disabled (its messages wait).")] = timedelta(days=5)
    webhook_secret_overlap: Annotated[timedelta, _doc("Default time a rotated webhook secret keeps signing beside the new one.")] = timedelta(hours=24)
    webhook_endpoint_limit: Annotated[int, _doc("Most webhook endpoints one tenant may have (`409 webhook_endpoint_limit` past it).")] = 50
    webhook_test_rate_limit: Annotated[int, _doc("Test events one tenant may send per minute, all endpoints together (`429 rate_limited` past it).")] = 20
    webhook_redelivery_rate_limit: Annotated[int, _doc("Message redeliveries one tenant may ask for per minute.")] = 60
    webhook_recovery_rate_limit: Annotated[int, _doc("Recovery jobs one tenant may start per hour.")] = 10
    stripe_api_key: Annotated[str, _doc("Stripe secret API key (`sk_...`). With `STRIPE_WEBHOOK_SECRET` it turns billing on (docs/billing.md); empty: billing is off and every tenant is unlimited. A secret: from a Secret, never logged.")] = ""
    stripe_webhook_secret: Annotated[str, _doc("Signing secret (`whsec_...`) of the Stripe webhook endpoint `{console}/billing/stripe/webhook`. A secret, like `STRIPE_API_KEY`.")] = ""
    stripe_api_base: Annotated[str, _doc("Base URL of the Stripe API. Empty: Stripe's own; tests point it at localstripe.")] = ""
    stripe_webhook_tolerance: Annotated[timedelta, _doc("How old a Stripe webhook's signed timestamp may be before it is refused as stale.")] = timedelta(minutes=5)
    billing_grace_period: Annotated[timedelta, _doc("How long after a failed payment a tenant keeps everything before new agent Sessions are refused.")] = timedelta(days=7)
    billing_sessions_retry_after: Annotated[timedelta, _doc("The `Retry-After` a suspended tenant's refused new agent Session is answered with (whole seconds).")] = timedelta(hours=1)
    billing_standing_cache: Annotated[timedelta, _doc("How long each issuer process reuses a tenant's billing account when deciding whether new Sessions may start (a payment is seen within it).")] = timedelta(seconds=30)
    billing_plans_file: Annotated[str, _doc("A TOML file of plans in the shape of the bundled `frontdoor_billing/plans.toml`. Empty: the bundled plans.")] = ""

    @property
    def is_dev(self) -> bool:
        """True in `dev` and `test`: loopback `http://` is allowed."""
        return self.env != "production"

    def nameservers(self) -> list[tuple[str, int]] | None:
        """``FRONTDOOR_DNS_NAMESERVERS`` parsed to ``(host, port)`` pairs, or None."""
        if not self.dns_nameservers.strip():
            return None
        out: list[tuple[str, int]] = []
        for raw in self.dns_nameservers.split(","):
            item = raw.strip()
            if not item:
                continue
            host, sep, port = item.rpartition(":")
            if not sep or not host or (host.count(":") and not host.endswith("]")):
                host, port = item, "53"
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise SettingsError(f"{ENV_NAMES['dns_nameservers']}: {item!r} is not host:port")
            out.append((host.strip("[]"), int(port)))
        return out

    def allowlist(self) -> tuple[str, ...]:
        """``FRONTDOOR_OUTBOUND_ALLOWLIST`` as a tuple: Frontdoor's own fetches, never webhooks."""
        return tuple(x.strip() for x in self.outbound_allowlist.split(",") if x.strip())

    def scanner_allowlist_entries(self) -> tuple[str, ...]:
        """``FRONTDOOR_SCANNER_ALLOWLIST`` as a tuple: the public domain scanner only."""
        return tuple(x.strip() for x in self.scanner_allowlist.split(",") if x.strip())

    def webhook_allowlist_entries(self) -> tuple[str, ...]:
        """``FRONTDOOR_WEBHOOK_ALLOWLIST`` as a tuple: webhook registration and delivery only."""
        return tuple(x.strip() for x in self.webhook_allowlist.split(",") if x.strip())

    def retry_schedule(self) -> tuple[timedelta, ...]:
        """``FRONTDOOR_WEBHOOK_RETRY_SCHEDULE`` parsed: the delay before each attempt."""
        delays = tuple(parse_duration(x) for x in self.webhook_retry_schedule.split(",") if x.strip())
        if not delays:
            raise SettingsError(f"{ENV_NAMES['webhook_retry_schedule']}: at least one attempt is needed")
        return delays


# Variables that predate our prefix keep their conventional names.
_UNPREFIXED = {
    "database_url": "DATABASE_URL",
    "redis_url": "REDIS_URL",
    "otel_exporter_otlp_endpoint": "OTEL_EXPORTER_OTLP_ENDPOINT",
    "stripe_api_key": "STRIPE_API_KEY",
    "stripe_webhook_secret": "STRIPE_WEBHOOK_SECRET",
}

ENV_NAMES: dict[str, str] = {
    f.name: _UNPREFIXED.get(f.name, "FRONTDOOR_" + f.name.upper())
    for f in msgspec.structs.fields(Settings)
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(text: str) -> timedelta:
    """Parse ``90``, ``30s``, ``15m``, ``72h``, ``7d`` or ``250ms`` into a timedelta."""
    m = _DURATION.match(text)
    if m is None:
        raise SettingsError(f"not a duration: {text!r} (use e.g. 30s, 15m, 72h, 7d)")
    return timedelta(seconds=float(m.group(1)) * _UNIT_SECONDS[m.group(2)])


def _public_url_ok(url: str, *, dev: bool) -> bool:
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return True
    loopback = parts.hostname in {"127.0.0.1", "localhost", "::1"}
    return dev and parts.scheme == "http" and loopback


def load_settings(environ: Mapping[str, str]) -> Settings:
    """Build `Settings` from an environment mapping, validating every field.

    Raises:
        SettingsError: naming the variable at fault.
    """
    raw: dict[str, Any] = {}
    for f in msgspec.structs.fields(Settings):
        var = ENV_NAMES[f.name]
        if var not in environ:
            continue
        value = environ[var]
        if f.type is timedelta or "timedelta" in str(f.type):
            try:
                raw[f.name] = parse_duration(value)
            except SettingsError as exc:
                raise SettingsError(f"{var}: {exc}") from None
        else:
            raw[f.name] = value
    try:
        settings = msgspec.convert(raw, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise SettingsError(_explain(str(exc))) from None
    settings.nameservers()  # raises SettingsError naming the variable
    settings.retry_schedule()
    for name, entries in (("outbound_allowlist", settings.allowlist()),
                          ("webhook_allowlist", settings.webhook_allowlist_entries()),
                          ("scanner_allowlist", settings.scanner_allowlist_entries())):
        try:
            AddressRules(OutboundPolicy(allowlist=entries))
        except ValueError as exc:
            raise SettingsError(f"{ENV_NAMES[name]}: {exc}") from None
    if settings.trusted_proxies:
        import ipaddress

        try:
            for part in settings.trusted_proxies.split(","):
                if part.strip():
                    ipaddress.ip_network(part.strip(), strict=False)
        except ValueError:
            raise SettingsError(f"{ENV_NAMES['trusted_proxies']}: not a list of CIDRs") from None
    if settings.redis_cluster:
        if urlsplit(settings.redis_url).scheme not in {"", "redis", "rediss"} or urlsplit(settings.redis_url).path not in {"", "/", "/0"}:
            raise SettingsError(f"{ENV_NAMES['redis_cluster']}: REDIS_URL must be a redis:// or rediss:// node of the"
                                " cluster, database 0")
        if not settings.celery_broker_url:
            raise SettingsError(f"{ENV_NAMES['redis_cluster']}: Celery's broker cannot be a Redis Cluster; set"
                                f" {ENV_NAMES['celery_broker_url']} to a single Redis")
    if settings.issuer_workers < 0:
        raise SettingsError(f"{ENV_NAMES['issuer_workers']}: not a number of workers (0: one per CPU)")
    if settings.ledger_workers < 0:
        raise SettingsError(f"{ENV_NAMES['ledger_workers']}: not a number of workers (0: one per CPU)")
    if not 0 <= settings.metrics_port <= 65535:
        raise SettingsError(f"{ENV_NAMES['metrics_port']}: not a port (0 turns the listener off)")
    if settings.docs_base_url and not (settings.docs_base_url.endswith("/")
                                       and _public_url_ok(settings.docs_base_url, dev=settings.is_dev)):
        raise SettingsError(f"{ENV_NAMES['docs_base_url']}: an https:// URL ending in '/', or empty")
    for name in ("issuer_base_url", "console_base_url", "ledger_base_url"):
        url = getattr(settings, name)
        if url.endswith("/"):
            raise SettingsError(f"{ENV_NAMES[name]} must not end with '/'")
        if not _public_url_ok(url, dev=settings.is_dev):
            raise SettingsError(
                f"{ENV_NAMES[name]} must be an https:// URL"
                + ("" if settings.is_dev else " outside dev mode (FRONTDOOR_ENV=production)")
            )
    return settings


def _explain(message: str) -> str:
    # msgspec says "... - at `$.field`"; name the environment variable instead.
    m = re.search(r"\$\.(\w+)", message)
    if m and m.group(1) in ENV_NAMES:
        return f"{ENV_NAMES[m.group(1)]}: {message.split(' - at', maxsplit=1)[0]}"
    return message


def _format_default(value: object) -> str:
    if isinstance(value, timedelta):
        secs = int(value.total_seconds())
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if secs % size == 0 and secs >= size:
                return f"{secs // size}{unit}"
        return f"{secs}s"
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value) if value != "" else "(empty)"


def settings_table() -> str:
    """The README's configuration table, generated from the field descriptions."""
    schema = msgspec.json.schema(Settings)
    props = schema["$defs"]["Settings"]["properties"]
    lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for f in msgspec.structs.fields(Settings):
        desc = props[f.name].get("description", "")
        lines.append(f"| `{ENV_NAMES[f.name]}` | `{_format_default(f.default)}` | {desc} |")
    return "\n".join(lines)
