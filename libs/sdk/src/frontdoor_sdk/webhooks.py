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

import base64
import binascii
import hashlib
import hmac
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Literal

import msgspec
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from frontdoor_protocol import RequestHeaders, header_values

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

DEFAULT_TOLERANCE: Final = 300.0
"""Seconds a delivery's timestamp may be away from now, either way (Standard Webhooks: 5 minutes)."""
SECRET_PREFIX: Final = "whsec_"
PUBLIC_KEY_PREFIX: Final = "whpk_"
_ED25519_KEY: Final = 32
_ED25519_SIGNATURE: Final = 64
_MAX_BODY: Final = 1024 * 1024
_MAX_ID: Final = 255
_MAX_SIGNATURE_HEADER: Final = 8192
_MIN_KEY: Final = 16
_MAX_KEY: Final = 128
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


def _key(secret: str) -> bytes:
    if not isinstance(secret, str) or not secret:
        raise ValueError("a webhook secret must be a non-empty whsec_... string")
    if secret.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError("a whpk_ public key is not a secret: pass it as public_keys=")
    encoded = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook secret must be whsec_ followed by base64") from None  # never echo it
    if not _MIN_KEY <= len(key) <= _MAX_KEY:
        raise ValueError(f"a webhook secret's key must be {_MIN_KEY} to {_MAX_KEY} bytes")
    return key


def _public_key(value: str) -> Ed25519PublicKey:
    if not isinstance(value, str) or not value.startswith(PUBLIC_KEY_PREFIX):
        raise ValueError("a webhook public key must be a whpk_... string")
    try:
        raw = base64.b64decode(value[len(PUBLIC_KEY_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("a webhook public key must be whpk_ followed by base64") from None
    if len(raw) != _ED25519_KEY:
        raise ValueError(f"a webhook public key holds {_ED25519_KEY} bytes (Ed25519)")
    return Ed25519PublicKey.from_public_bytes(raw)


def _signature(key: bytes, msg_id: str, timestamp: int, body: bytes) -> bytes:
    return hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()


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
    return "v1," + base64.b64encode(_signature(_key(secret), msg_id, seconds, body)).decode()


def _ed25519_verifies(key: Ed25519PublicKey, signature: bytes, content: bytes) -> bool:
    try:
        key.verify(signature, content)
    except InvalidSignature:
        return False
    return True


def _one(headers: RequestHeaders, name: str) -> str:
    values = header_values(headers, name)
    if len(values) != 1 or not values[0].strip():
        raise WebhookVerificationError("missing_header", f"exactly one {name} header is required")
    return values[0].strip()


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
        ValueError: If a secret is not ``whsec_`` + base64 of 16 to 128 bytes, a public
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
        self._keys = tuple(_key(value) for value in values)
        self._public_keys = tuple(_public_key(value) for value in public)
        self._tolerance = tolerance
        self._clock = clock or utc_now
        self._replays: ReplayCache | None = (
            InMemoryReplayCache(clock=self._clock) if replay_cache is _DEFAULT else replay_cache
        )
        self._refuse_duplicates = refuse_duplicates
        self._max_body = max_body

    def __repr__(self) -> str:
        return (f"WebhookVerifier({len(self._keys)} secret(s), {len(self._public_keys)} public key(s),"
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
        msg_id = _one(headers, "webhook-id")
        raw_timestamp = _one(headers, "webhook-timestamp")
        signatures = _one(headers, "webhook-signature")
        if len(msg_id) > _MAX_ID or len(signatures) > _MAX_SIGNATURE_HEADER:
            raise WebhookVerificationError("missing_header", "a webhook header is too long")
        if not (raw_timestamp.isascii() and raw_timestamp.isdigit()) or len(raw_timestamp) > 12:
            raise WebhookVerificationError("bad_timestamp", "webhook-timestamp must be integer seconds")
        timestamp = int(raw_timestamp)
        now = self._clock().timestamp()
        if timestamp < now - self._tolerance:
            raise WebhookVerificationError("too_old", "the webhook timestamp is too old")
        if timestamp > now + self._tolerance:
            raise WebhookVerificationError("too_new", "the webhook timestamp is in the future")
        expected = [_signature(key, msg_id, timestamp, body) for key in self._keys]
        content = f"{msg_id}.{timestamp}.".encode() + body
        matched = False
        for entry in signatures.split(" "):
            version, _, encoded = entry.partition(",")
            if version not in ("v1", "v1a") or not encoded:
                continue  # other schemes and empty entries are not ours
            try:
                candidate = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                continue
            if version == "v1":
                for signature in expected:
                    # Compare every pair: no early exit that would time which one matched.
                    matched |= hmac.compare_digest(candidate, signature)
            elif len(candidate) == _ED25519_SIGNATURE:
                matched |= any(_ed25519_verifies(key, candidate, content) for key in self._public_keys)
        if not matched:
            raise WebhookVerificationError("bad_signature", "no webhook signature matches")
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
