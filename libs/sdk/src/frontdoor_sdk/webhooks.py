"""Verify Frontdoor's webhooks (Standard Webhooks): the perform webhook and any other event.

Frontdoor signs every delivery the Standard Webhooks way (https://www.standardwebhooks.com):

- ``webhook-id``: the message ID, **the same on every retry of one message**;
- ``webhook-timestamp``: the attempt's time, integer seconds since the epoch;
- ``webhook-signature``: one or more space-separated ``v1,<base64>`` entries (several
  while a secret is being rotated), each ``HMAC-SHA256(key, "{id}.{timestamp}.{body}")``
  with ``key`` the base64-decoded part of your endpoint's ``whsec_...`` secret; and, for
  an endpoint using Ed25519 (``signing_scheme: v1a``), ``v1a,<base64>`` entries: an
  Ed25519 signature over the same content, verified with the endpoint's public key
  ``whpk_...`` (base64 of the raw 32-byte key), which is not secret.

:class:`WebhookVerifier` checks the signature against every secret (in constant time)
and public key you give it, accepting the delivery when any of them verifies any entry,
that the timestamp is within ``tolerance`` of now either way, and parses the body into a
:class:`WebhookEvent`. Anything wrong is a
:class:`WebhookVerificationError`: answer ``401`` (or ``400``) and perform nothing.

**Retries and replays.** Deliveries are at least once: a retry (your answer was lost, you
timed out, you answered ``5xx``) carries the same ``webhook-id`` and the same
``data.idempotency_key``. So a repeated ``webhook-id`` is normal, and refusing it would
lose the retry that tells Frontdoor your outcome. By default the verifier remembers IDs and
marks a repeat ``duplicate=True`` instead of refusing it. What prevents performing twice
is **your idempotency key**: store your answer under ``data.idempotency_key`` and answer a
retry with it. Pass ``refuse_duplicates=True`` only for events that are safe to drop, and
``replay_cache=None`` to not remember IDs at all.

Example (Litestar)::

    webhooks = WebhookVerifier(os.environ["FRONTDOOR_WEBHOOK_SECRET"])

    @post("/webhooks/frontdoor")
    async def perform(request: Request) -> Response:
        try:
            event = await webhooks.verify(await request.body(), request.headers)
        except WebhookVerificationError:
            return Response({"error": "invalid_signature"}, status_code=401)
        if event.type != "operation.perform":
            return Response(status_code=204)                            # events: nothing to perform
        return answer_once(event.data["idempotency_key"], event.data)   # your idempotent perform
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import msgspec
from frontdoor_protocol import (
    DEFAULT_WEBHOOK_TOLERANCE,
    PUBLIC_KEY_PREFIX,
    RequestHeaders,
    WebhookKeys,
    WebhookSignatureError,
    parse_public_key,
    parse_secret,
    sign_v1,
    verify_webhook_signature,
)

from frontdoor_sdk.clock import Clock, utc_now
from frontdoor_sdk.replay_cache import InMemoryReplayCache, ReplayCache

__all__ = [
    "DEFAULT_TOLERANCE",
    "WebhookEvent",
    "WebhookRefusedReason",
    "WebhookVerificationError",
    "WebhookVerifier",
    "sign_webhook",
]

DEFAULT_TOLERANCE: Final = float(DEFAULT_WEBHOOK_TOLERANCE)
"""Seconds a delivery's timestamp may be away from now, either way (Standard Webhooks: 5 minutes)."""
_MAX_BODY: Final = 1024 * 1024
_DEFAULT: Final[Any] = object()

WebhookRefusedReason = Literal[
    "missing_header",
    "bad_timestamp",
    "too_old",
    "too_new",
    "bad_signature",
    "too_large",
    "malformed_body",
    "duplicate",
]


class WebhookVerificationError(Exception):
    """The request is not a webhook from Frontdoor you should act on: perform nothing.

    Attributes:
        reason: Why, for your logs (never a secret): see :data:`WebhookRefusedReason`.
        status: The status to answer: ``400`` for a malformed request, else ``401``.
    """

    def __init__(self, reason: WebhookRefusedReason, message: str) -> None:
        super().__init__(message)
        self.reason: WebhookRefusedReason = reason

    @property
    def status(self) -> int:
        """``400`` for a malformed request or body, ``401`` for a signature or time problem."""
        return 400 if self.reason in ("missing_header", "bad_timestamp", "too_large", "malformed_body") else 401


@dataclass(frozen=True)
class WebhookEvent:
    """A verified delivery.

    Attributes:
        id: The ``webhook-id``: the message, the same on every retry.
        type: The event type, e.g. ``operation.perform``.
        timestamp: When the event happened (the body's ``timestamp``; the signed attempt
            time if the body has none), aware UTC.
        data: The event's ``data`` object, e.g. for ``operation.perform``:
            ``idempotency_key``, ``operation``, ``kind``, ``account``, ``client_id``,
            ``user_id``, ``input``.
        sent_at: The signed ``webhook-timestamp`` of this attempt.
        duplicate: ``True`` when this ``webhook-id`` was seen before (a retry): answer it
            again from what you stored under the idempotency key; never perform twice.
    """

    id: str
    type: str
    timestamp: datetime
    data: dict[str, Any]
    sent_at: datetime
    duplicate: bool = False
    payload: dict[str, Any] = field(default_factory=dict, repr=False)


def _secret(value: str) -> bytes:
    if isinstance(value, str) and value.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError("a whpk_ public key is not a secret: pass it as public_keys=")
    return parse_secret(value)


def sign_webhook(secret: str, msg_id: str, timestamp: int | datetime, body: bytes) -> str:
    """The ``webhook-signature`` value Frontdoor would send: ``v1,<base64>``.

    For your tests: build a delivery your receiver must accept.

    Args:
        secret: The endpoint secret, ``whsec_...``.
        msg_id: The ``webhook-id``.
        timestamp: The ``webhook-timestamp`` (epoch seconds, or an aware ``datetime``).
        body: The exact body bytes.
    """
    seconds = int(timestamp.timestamp()) if isinstance(timestamp, datetime) else int(timestamp)
    return sign_v1(secret, msg_id, seconds, body)


class _Payload(msgspec.Struct):
    type: str
    data: dict[str, Any] = msgspec.field(default_factory=dict)
    timestamp: datetime | None = None


class WebhookVerifier:
    """Verifies Standard Webhooks deliveries signed with one of your endpoint's secrets or keys.

    Args:
        secrets: The endpoint's secret (``whsec_...``), or several while rotating: a
            ``v1`` signature made with any of them is accepted. May be empty when
            ``public_keys`` is given.
        public_keys: The endpoint's Ed25519 public key (``whpk_...``, as the management
            API shows it), or several while it rotates: a ``v1a`` signature verified by
            any of them is accepted too. A ``v1a``-only receiver holds no shared secret.
        tolerance: Seconds the ``webhook-timestamp`` may differ from now, either way.
        replay_cache: Where ``webhook-id`` values are remembered to mark retries
            ``duplicate``; in-process by default, ``None`` to remember nothing. The
            :class:`frontdoor_sdk.ReplayCache` protocol lets replicas share one.
        refuse_duplicates: Refuse a repeated ``webhook-id`` (reason ``duplicate``) instead
            of marking it. Not for the perform webhook: a retry must get your answer again.
        clock: The time source (timezone-aware); the system clock if omitted.
        max_body: The largest body accepted, in bytes.

    Raises:
        ValueError: If a secret is not ``whsec_`` + base64 of 24 to 64 bytes, a public
            key is not ``whpk_`` + base64 of 32 bytes, or neither is given.
    """

    def __init__(
        self,
        secrets: str | Sequence[str] = (),
        *,
        public_keys: str | Sequence[str] = (),
        tolerance: float = DEFAULT_TOLERANCE,
        replay_cache: ReplayCache | None = _DEFAULT,
        refuse_duplicates: bool = False,
        clock: Clock | None = None,
        max_body: int = _MAX_BODY,
    ) -> None:
        values = [secrets] if isinstance(secrets, str) else list(secrets)
        public = [public_keys] if isinstance(public_keys, str) else list(public_keys)
        if not values and not public:
            raise ValueError("at least one webhook secret (or public key) is required")
        if tolerance <= 0:
            raise ValueError("tolerance must be positive")
        self._keys = WebhookKeys(tuple(_secret(value) for value in values),
                                 tuple(parse_public_key(value) for value in public))
        self._tolerance = tolerance
        self._clock = clock or utc_now
        self._replays: ReplayCache | None = (
            InMemoryReplayCache(clock=self._clock) if replay_cache is _DEFAULT else replay_cache
        )
        self._refuse_duplicates = refuse_duplicates
        self._max_body = max_body

    def __repr__(self) -> str:
        return (f"WebhookVerifier({len(self._keys.secrets)} secret(s), {len(self._keys.public_keys)} public key(s),"
                f" tolerance={self._tolerance:g}s)")  # never a secret

    def check_signature(self, body: bytes, headers: RequestHeaders) -> tuple[str, datetime]:
        """The signature and time checks alone, without parsing or remembering anything.

        Returns:
            The ``webhook-id`` and the signed attempt time.

        Raises:
            WebhookVerificationError: A header is missing or repeated, the timestamp is out
                of tolerance, the body is too large or no signature matches.
        """
        if len(body) > self._max_body:
            raise WebhookVerificationError("too_large", "the webhook body is too large")
        try:
            msg_id, timestamp = verify_webhook_signature(self._keys, headers, body, now=self._clock().timestamp(),
                                                         tolerance=self._tolerance)
        except WebhookSignatureError as refused:
            raise WebhookVerificationError(refused.reason, str(refused)) from None
        return msg_id, datetime.fromtimestamp(timestamp, UTC)

    async def verify(self, body: bytes, headers: RequestHeaders) -> WebhookEvent:
        """Verify one delivery and parse it.

        Args:
            body: The exact request body bytes (read them before any JSON parsing).
            headers: The request headers (a mapping, a multi-map, or pairs).

        Returns:
            The event; ``duplicate`` is ``True`` for a ``webhook-id`` seen before.

        Raises:
            WebhookVerificationError: See :meth:`check_signature`; also a body that is not
                a JSON object with a string ``type`` (``malformed_body``), and with
                ``refuse_duplicates`` a repeated ``webhook-id`` (``duplicate``).
        """
        msg_id, sent_at = self.check_signature(body, headers)
        try:
            payload = msgspec.json.decode(body)
            parsed = msgspec.convert(payload, type=_Payload)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise WebhookVerificationError("malformed_body", "the webhook body is not a Standard Webhooks event") from None
        duplicate = False
        if self._replays is not None:
            # Remember the ID for as long as a delivery of it could still pass the time check.
            until = int(max(sent_at.timestamp(), self._clock().timestamp()) + self._tolerance) + 1
            duplicate = not await self._replays.first_use(f"webhook:{msg_id}", until=until)
            if duplicate and self._refuse_duplicates:
                raise WebhookVerificationError("duplicate", "this webhook-id was already delivered")
        occurred = parsed.timestamp if parsed.timestamp is not None and parsed.timestamp.tzinfo else sent_at
        return WebhookEvent(
            id=msg_id,
            type=parsed.type,
            timestamp=occurred,
            data=parsed.data,
            sent_at=sent_at,
            duplicate=duplicate,
            payload=payload,
        )

    async def verify_asgi(
        self,
        scope: Mapping[str, Any],
        receive: Callable[[], Awaitable[MutableMapping[str, Any]]],
    ) -> WebhookEvent:
        """:meth:`verify` for a plain ASGI app: reads the body (at most ``max_body``) and headers.

        Raises:
            WebhookVerificationError: As :meth:`verify`; ``too_large`` stops reading early.
        """
        headers = [(bytes(k).decode("latin-1"), bytes(v).decode("latin-1")) for k, v in scope.get("headers", ())]
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":
                break
            chunk = bytes(message.get("body", b""))
            size += len(chunk)
            if size > self._max_body:
                raise WebhookVerificationError("too_large", "the webhook body is too large")
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return await self.verify(b"".join(chunks), headers)
