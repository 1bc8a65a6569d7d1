"""How a delivery reaches the network: the `Sender` protocol and its SSRF-safe implementation.

The delivery engine depends only on `Sender`, so tests and other transports can stand
in. `SafeSender` goes through `frontdoor_core.outbound.SafeFetcher` (or the deliverer's
`frontdoor_webhooks.delivery_client.DeliveryClient`, which keeps the same rules): HTTPS
only, public addresses only (checked on the address connected to), no redirects, bounded
time and bytes. Failures without an answer become a `SendError` carrying an `ErrorClass`.

`partitioned` gives an attempt a sender whose connections are its tenant's own: over a
`DeliveryClient` one tenant's POSTs take at most that client's ``max_connections`` of an
origin's connections, so a tenant holding a shared webhook host's connections open (a
slow relay) cannot make another tenant's deliveries to that host wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

import msgspec
from frontdoor_core.outbound import FetchError, FetchErrorCode, FetchResult

from .delivery_client import DeliveryClient
from .delivery_outcome import ErrorClass

__all__ = ["RESPONSE_LIMIT", "Poster", "SafeSender", "SendError", "Sender", "SenderResponse", "partitioned"]

RESPONSE_LIMIT = 64 * 1024
"""Most response body bytes kept (enough for a perform webhook's JSON answer)."""

_ERROR_CLASSES = {
    FetchErrorCode.TIMEOUT: ErrorClass.TIMEOUT,
    FetchErrorCode.CONNECT_ERROR: ErrorClass.CONNECT,
    FetchErrorCode.DNS_ERROR: ErrorClass.DNS,
    FetchErrorCode.TLS_ERROR: ErrorClass.TLS,
    FetchErrorCode.BLOCKED_ADDRESS: ErrorClass.BLOCKED_ADDRESS,
    FetchErrorCode.MIXED_ANSWERS: ErrorClass.BLOCKED_ADDRESS,
    FetchErrorCode.NOT_HTTPS: ErrorClass.INVALID_URL,
    FetchErrorCode.BAD_URL: ErrorClass.INVALID_URL,
    FetchErrorCode.REDIRECT_NOT_HTTPS: ErrorClass.INVALID_URL,
}


class SenderResponse(msgspec.Struct, frozen=True, kw_only=True):
    """The receiver's answer.

    Attributes:
        status: The HTTP status.
        headers: Response headers, names lower-cased.
        body: The first `RESPONSE_LIMIT` bytes of the body, as sent.
        truncated: True when the body was longer and was cut at `RESPONSE_LIMIT` (or was
            dropped because it came with a content coding): it cannot be read as a whole.
    """

    status: int
    headers: Mapping[str, str]
    body: bytes
    truncated: bool = False


class SendError(Exception):
    """No usable answer came back.

    Attributes:
        error_class: Why, as stored on the attempt.
        detail: A sentence for the attempt row and logs; never the request's secrets.
    """

    def __init__(self, error_class: ErrorClass, detail: str) -> None:
        super().__init__(f"{error_class.value}: {detail}")
        self.error_class = error_class
        self.detail = detail


class Sender(Protocol):
    """Posts one signed delivery."""

    # The transport enforces ``timeout`` as one deadline over connect, TLS and every byte.
    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SenderResponse:  # noqa: ASYNC109
        """POST ``body`` with ``headers`` to ``url`` within ``timeout`` seconds.

        Returns:
            The answer, whatever its status.

        Raises:
            SendError: No answer (timeout, connect, TLS, refused address...).
        """
        ...


class Poster(Protocol):
    """What `SafeSender` posts through: `SafeFetcher` (or its `pooled` form) or `DeliveryClient`."""

    async def post(self, url: str, body: bytes, *, headers: Mapping[str, str], timeout: float | None = None,  # noqa: ASYNC109
                   max_bytes: int | None = None) -> FetchResult:
        """POST once under the outbound rules; any status; `FetchError` otherwise."""
        ...


class SafeSender:
    """`Sender` over `SafeFetcher` or `DeliveryClient`: the production transport."""

    __slots__ = ("_client", "_fetcher", "_partition")

    def __init__(self, fetcher: Poster, *, partition: str | None = None) -> None:
        """Wrap a fetcher (its policy decides HTTPS, loopback and allowlist rules).

        ``partition`` (a tenant ID): over a `DeliveryClient`, the connections this sender's
        POSTs use are that partition's (see `partitioned`); ignored by other fetchers.
        """
        self._fetcher = fetcher
        self._client = fetcher if isinstance(fetcher, DeliveryClient) else None
        self._partition = partition

    def partitioned(self, partition: str) -> SafeSender:
        """This sender over the same fetcher, its POSTs in ``partition``."""
        return SafeSender(self._fetcher, partition=partition)

    async def post(self, url: str, body: bytes, headers: Mapping[str, str], timeout: float) -> SenderResponse:  # noqa: ASYNC109
        """See `Sender.post`."""
        try:
            if self._client is not None:
                result = await self._client.post(url, body, headers=headers, timeout=timeout,
                                                 max_bytes=RESPONSE_LIMIT, partition=self._partition)
            else:
                result = await self._fetcher.post(url, body, headers=headers, timeout=timeout,
                                                  max_bytes=RESPONSE_LIMIT)
        except FetchError as exc:
            raise SendError(_ERROR_CLASSES.get(exc.code, ErrorClass.INVALID_RESPONSE), exc.message) from None
        return SenderResponse(status=result.status, headers=result.headers, body=result.body,
                              truncated=result.truncated)


def partitioned(sender: Sender, partition: str) -> Sender:
    """``sender`` with its POSTs in ``partition`` (the tenant) when it is a `SafeSender`; else itself.

    The deliverer and the ledger send each attempt through ``partitioned(sender, tenant_id)``.
    """
    return sender.partitioned(partition) if isinstance(sender, SafeSender) else sender
