"""Parsing a JWS in compact serialization (RFC 7515 §3.1, §7.1) without trusting it.

Assertions, DPoP proofs and Session Tokens all arrive as ``header.payload.signature``.
Parsing here is strict and happens once: canonical base64url segments, a protected header
that is strict JSON (duplicate members refused, GUIDE-json-01, so a second ``alg`` cannot
hide behind the first) and no ``crit`` (RFC 7515 §4.1.11: no extension is understood, so
any listed one must be refused). Nothing is verified yet; the callers choose the key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

import msgspec
from joserfc.jwk import Key
from joserfc.jws import JWSRegistry

from frontdoor_protocol.base64url import b64url_decode, b64url_encode
from frontdoor_protocol.strict_json import MalformedJSON, loads_object

__all__ = [
    "MAX_COMPACT_JWS_LENGTH",
    "CompactJWS",
    "MalformedJWS",
    "MalformedJWSReason",
    "parse_compact_jws",
    "sign_compact_jws",
]

MAX_COMPACT_JWS_LENGTH: Final = 8192
"""Longest compact JWS accepted: an RSA-4096 DPoP proof is under 2 KB."""

_ENCODER: Final = msgspec.json.Encoder()

MalformedJWSReason = Literal["not_string", "too_long", "not_compact", "bad_encoding", "bad_header", "critical_header"]
"""Why a value is not a usable compact JWS; stable and safe to log (never the input)."""


class MalformedJWS(ValueError):
    """The value is not a compact JWS this library accepts; ``reason`` says why.

    Attributes:
        reason: One of :data:`MalformedJWSReason`.
    """

    def __init__(self, reason: MalformedJWSReason) -> None:
        super().__init__(reason)
        self.reason: MalformedJWSReason = reason


class CompactJWS(msgspec.Struct, frozen=True, kw_only=True):
    """A parsed, not yet verified, compact JWS.

    Attributes:
        header: The protected header, strict JSON, with a string ``alg``.
        payload: The decoded payload bytes (JSON for a JWT, not yet decoded).
        signing_input: ``ASCII(header_segment "." payload_segment)`` (RFC 7515 §5.2).
        signature: The decoded signature bytes.
    """

    header: dict[str, Any]
    payload: bytes
    signing_input: bytes
    signature: bytes

    @property
    def alg(self) -> str:
        """The header's ``alg``."""
        return str(self.header["alg"])

    def claims(self) -> dict[str, Any]:
        """The payload as a strict JSON object (RFC 7519 §7.2 step 10).

        Raises:
            MalformedJWS: ``bad_encoding`` when the payload is not a strict JSON object.
        """
        try:
            return loads_object(self.payload)
        except MalformedJSON:
            raise MalformedJWS("bad_encoding") from None


def parse_compact_jws(value: object, *, max_length: int = MAX_COMPACT_JWS_LENGTH) -> CompactJWS:
    """Split and decode a compact JWS.

    Args:
        value: The serialized JWS, as received.
        max_length: Longest accepted serialization, in characters.

    Returns:
        The parsed JWS; its signature is not checked.

    Raises:
        MalformedJWS: For a non-string, an over-long value, anything but three canonical
            base64url segments, a header that is not a strict JSON object with a string
            ``alg``, or a header with ``crit``.
    """
    if not isinstance(value, str):
        raise MalformedJWS("not_string")
    if len(value) > max_length:
        raise MalformedJWS("too_long")
    parts = value.split(".")
    if len(parts) != 3:
        raise MalformedJWS("not_compact")
    header_segment, payload_segment, signature_segment = parts
    try:
        header_bytes = b64url_decode(header_segment)
        payload = b64url_decode(payload_segment)
        signature = b64url_decode(signature_segment)
    except ValueError:
        raise MalformedJWS("bad_encoding") from None
    try:
        header = loads_object(header_bytes)
    except MalformedJSON:
        raise MalformedJWS("bad_header") from None
    if not isinstance(header.get("alg"), str):
        raise MalformedJWS("bad_header")
    if "crit" in header:
        raise MalformedJWS("critical_header")
    return CompactJWS(
        header=header,
        payload=payload,
        signing_input=f"{header_segment}.{payload_segment}".encode("ascii"),
        signature=signature,
    )


def sign_compact_jws(header: Mapping[str, Any], claims: Mapping[str, Any], key: Key) -> str:
    """Sign ``claims`` under ``header`` (whose ``alg`` names the algorithm) as a compact JWS.

    Members whose value is ``None`` are left out of the payload, so optional claims of a
    struct turned into a dict are absent rather than ``null``.

    Args:
        header: The protected header, with a string ``alg`` joserfc implements.
        claims: The payload members.
        key: The private key to sign with; it must fit ``alg``.

    Returns:
        ``header.payload.signature``.

    Raises:
        KeyError: When joserfc has no such ``alg``.
    """
    members = {name: value for name, value in claims.items() if value is not None}
    signing_input = f"{b64url_encode(_ENCODER.encode(dict(header)))}.{b64url_encode(_ENCODER.encode(members))}"
    signature = JWSRegistry.algorithms[str(header["alg"])].sign(signing_input.encode("ascii"), key)
    return f"{signing_input}.{b64url_encode(signature)}"
