"""How the sdk asks Frontdoor's resource-server endpoints and reads the answer (private).

Shared by :mod:`frontdoor_sdk.introspection`, :mod:`frontdoor_sdk.session_state` and
:mod:`frontdoor_sdk.agent_keys`: one ``POST`` with the resource-server credential, no
redirects; 401/403 is the credential refused, anything but a 200 within the size cap that
decodes is "unavailable" (fail closed), carrying Frontdoor's ``Retry-After``.

``http`` is the caller's ``httpx.AsyncClient``, or the verifier's own
:class:`~frontdoor_sdk._lean_http.LeanClient` for the per-request calls (introspection,
``session-state``) when it made its client itself: the same credential, body and
``Accept``, and the same reading of the answer.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Final, Protocol, TypeVar
from urllib.parse import urlencode

import httpx
import msgspec

from frontdoor_sdk._lean_http import LeanClient, LeanHTTPError

_LOG: Final = logging.getLogger("frontdoor_sdk")

T = TypeVar("T")

FrontdoorHTTP = httpx.AsyncClient | LeanClient
"""What the sdk asks Frontdoor with."""

_FORM: Final = "application/x-www-form-urlencoded"
_JSON: Final = "application/json"
_DEFAULT_MAX_BYTES: Final = 64 * 1024


class Answer(Protocol):
    """Frontdoor's answer as :func:`decode_answer` reads it (``httpx.Response`` or ``LeanResponse``)."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def content(self) -> bytes: ...


class Unavailable(Exception):
    """Frontdoor gave no usable answer; the callers' ``...Unavailable`` errors derive from it.

    Attributes:
        retry_after: Frontdoor's ``Retry-After`` in whole seconds, when it sent one.
    """

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_of(response: Answer) -> str | None:
    """Frontdoor's ``Retry-After`` when it is whole seconds (at most six digits), else ``None``."""
    value = response.headers.get("retry-after", "")
    return value if value.isascii() and value.isdigit() and len(value) <= 6 else None


async def post(
    http: FrontdoorHTTP,
    url: str,
    *,
    authorization: str,
    seconds: float,
    endpoint: str,
    unavailable: type[Unavailable],
    json: Any = None,
    data: dict[str, str] | None = None,
    max_bytes: int = _DEFAULT_MAX_BYTES,
) -> Answer:
    """``POST url`` with the credential; a network failure raises ``unavailable``.

    ``max_bytes`` is the caller's size cap: the lean client reads at most one byte more
    (so :func:`decode_answer` still sees an answer too long); ``httpx`` reads it all.
    """
    if isinstance(http, LeanClient):
        if data is not None:
            body, content_type = urlencode(data).encode(), _FORM
        else:
            body, content_type = msgspec.json.encode(json), _JSON
        try:
            return await http.post(url, authorization=authorization, content_type=content_type, body=body,
                                   seconds=seconds, max_bytes=max_bytes)
        except LeanHTTPError as failure:
            _LOG.warning("frontdoor_sdk: %s failed: %s", endpoint, failure)  # a fixed phrase, no server text
            raise unavailable(f"{endpoint} could not be reached") from None
    try:
        return await http.post(
            url,
            json=json,
            data=data,
            headers={"Authorization": authorization, "Accept": "application/json"},
            timeout=seconds,
            follow_redirects=False,
        )
    except httpx.HTTPError as failure:
        _LOG.warning("frontdoor_sdk: %s failed: %s", endpoint, type(failure).__name__)
        raise unavailable(f"{endpoint} could not be reached") from None


def decode_answer(
    response: Answer,
    answer_type: type[T],
    *,
    endpoint: str,
    nothing: str,
    max_bytes: int,
    unavailable: type[Unavailable],
    refused: type[Exception],
) -> T:
    """The 200 answer decoded as ``answer_type``.

    Raises:
        refused: 401/403, the resource-server credential was refused.
        unavailable: Another status, an answer over ``max_bytes`` or a malformed one
            (the message is ``"{endpoint} answered {nothing}"`` for a status or size).
    """
    if response.status_code in (401, 403):
        _LOG.error("frontdoor_sdk: Frontdoor refused the resource-server credential (HTTP %s)", response.status_code)
        raise refused("the resource-server credential was refused")
    if response.status_code != 200 or len(response.content) > max_bytes:
        _LOG.warning("frontdoor_sdk: %s answered HTTP %s", endpoint, response.status_code)
        raise unavailable(f"{endpoint} answered {nothing}", retry_after_of(response))
    try:
        return msgspec.json.decode(response.content, type=answer_type)
    except (msgspec.DecodeError, msgspec.ValidationError):
        _LOG.warning("frontdoor_sdk: %s answered a malformed document", endpoint)
        raise unavailable(f"{endpoint} answered a malformed document") from None
