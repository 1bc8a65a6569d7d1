"""How the sdk asks Frontdoor's resource-server endpoints and reads the answer (private).

Shared by :mod:`frontdoor_sdk.introspection`, :mod:`frontdoor_sdk.session_state` and
:mod:`frontdoor_sdk.agent_keys`: one ``POST`` with the resource-server credential, no
redirects; 401/403 is the credential refused, anything but a 200 within the size cap that
decodes is "unavailable" (fail closed), carrying Frontdoor's ``Retry-After``.
"""

from __future__ import annotations

import logging
from typing import Any, Final, TypeVar

import httpx
import msgspec

_LOG: Final = logging.getLogger("frontdoor_sdk")

T = TypeVar("T")


class Unavailable(Exception):
    """Frontdoor gave no usable answer; the callers' ``...Unavailable`` errors derive from it.

    Attributes:
        retry_after: Frontdoor's ``Retry-After`` in whole seconds, when it sent one.
    """

    def __init__(self, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after_of(response: httpx.Response) -> str | None:
    """Frontdoor's ``Retry-After`` when it is whole seconds (at most six digits), else ``None``."""
    value = response.headers.get("retry-after", "")
    return value if value.isascii() and value.isdigit() and len(value) <= 6 else None


async def post(
    http: httpx.AsyncClient,
    url: str,
    *,
    authorization: str,
    seconds: float,
    endpoint: str,
    unavailable: type[Unavailable],
    json: Any = None,
    data: dict[str, str] | None = None,
) -> httpx.Response:
    """``POST url`` with the credential; a network failure raises ``unavailable``."""
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
    response: httpx.Response,
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
