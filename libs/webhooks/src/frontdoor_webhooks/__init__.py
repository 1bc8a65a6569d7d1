"""Webhooks: Standard Webhooks signing, endpoint secrets, the retry policy, messages, attempts and delivery.

Pure parts (no I/O, time passed in): `signing`, `retry_policy`, `delivery_outcome`,
`endpoint_url`, `event_types`. Database use cases take an asyncpg connection and never
commit: `endpoints`, `messages` (the outbox), `attempts`. `deliver` runs one attempt
end to end over a pool and a `Sender`.
"""

from .attempts import EXCERPT_LIMIT, Attempt, list_attempts, redacted_headers
from .delivery import ClaimedMessage, DeliveryReport, claim, deliver, due_messages
from .delivery_outcome import ABORT_HEADER, ErrorClass, Verdict, classify, status_error_class
from .delivery_policy import DeliveryPolicy
from .endpoint_secrets import signing_secrets
from .endpoint_url import validate_endpoint_url
from .endpoints import (
    CreatedEndpoint,
    Endpoint,
    create_endpoint,
    delete_endpoint,
    disable_endpoint,
    enable_endpoint,
    get_endpoint,
    list_endpoints,
    rotate_secret,
    update_endpoint,
)
from .event_types import EVENT_TYPES, PERFORM, validate_event_types
from .messages import (
    NOTIFY_CHANNEL,
    Message,
    MessageState,
    Purpose,
    build_body,
    enqueue_event,
    enqueue_message,
    get_message,
    list_messages,
    prune,
    recover,
    redeliver,
)
from .retry_policy import RetryPolicy, next_attempt_at, parse_retry_after
from .sender import RESPONSE_LIMIT, SafeSender, Sender, SenderResponse, SendError
from .signing import (
    SECRET_PREFIX,
    SIGNATURE_HEADER,
    WebhookVerificationError,
    new_secret,
    sign,
    signature_header,
    verify,
    webhook_headers,
)

__all__ = [
    "ABORT_HEADER",
    "EVENT_TYPES",
    "EXCERPT_LIMIT",
    "NOTIFY_CHANNEL",
    "PERFORM",
    "RESPONSE_LIMIT",
    "SECRET_PREFIX",
    "SIGNATURE_HEADER",
    "Attempt",
    "ClaimedMessage",
    "CreatedEndpoint",
    "DeliveryPolicy",
    "DeliveryReport",
    "Endpoint",
    "ErrorClass",
    "Message",
    "MessageState",
    "Purpose",
    "RetryPolicy",
    "SafeSender",
    "SendError",
    "Sender",
    "SenderResponse",
    "Verdict",
    "WebhookVerificationError",
    "build_body",
    "claim",
    "classify",
    "create_endpoint",
    "delete_endpoint",
    "deliver",
    "disable_endpoint",
    "due_messages",
    "enable_endpoint",
    "enqueue_event",
    "enqueue_message",
    "get_endpoint",
    "get_message",
    "list_attempts",
    "list_endpoints",
    "list_messages",
    "new_secret",
    "next_attempt_at",
    "parse_retry_after",
    "prune",
    "recover",
    "redacted_headers",
    "redeliver",
    "rotate_secret",
    "sign",
    "signature_header",
    "signing_secrets",
    "status_error_class",
    "update_endpoint",
    "validate_endpoint_url",
    "validate_event_types",
    "verify",
    "webhook_headers",
]
