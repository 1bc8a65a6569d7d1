"""Strict JSON decoding (GUIDE-json-01, RFC 8259)."""

from __future__ import annotations

import json

import pytest
from frontdoor_protocol import MalformedJSON, loads, loads_object

from .pap_fixtures import conformance_cases


def _reason(data: bytes | str) -> str:
    with pytest.raises(MalformedJSON) as refused:
        loads(data)
    return refused.value.reason


@pytest.mark.parametrize("text", conformance_cases("security", "strict_json")[0]["input"])
def test_guide_json_01_peer_suite_duplicate_members_are_refused(text: str) -> None:
    """GUIDE-json-01: every duplicate-member case of the peer suite is refused."""
    assert _reason(text) == "duplicate_member"


def test_guide_json_01_duplicate_member_refused_at_depth() -> None:
    """GUIDE-json-01: a duplicate deep inside arrays and objects is still found."""
    assert _reason(b'{"a": [1, {"b": {"c": 1, "c": 2}}]}') == "duplicate_member"


def test_guide_json_01_same_name_in_sibling_objects_is_fine() -> None:
    """GUIDE-json-01: uniqueness is per object, not per document."""
    assert loads(b'[{"id": 1}, {"id": 2}]') == [{"id": 1}, {"id": 2}]


def test_guide_json_01_bytes_must_be_utf8() -> None:
    """GUIDE-json-01 / RFC 8259 §8.1: bytes that are not UTF-8 are refused."""
    assert _reason(b'{"name": "caf\xe9"}') == "invalid_utf8"


def test_rfc8259_8_1_utf16_is_not_guessed() -> None:
    """RFC 8259 §8.1: unlike json.loads, UTF-16 bytes are not auto-detected."""
    with_bom = '{"a": 1}'.encode("utf-16")
    without_bom = '{"a": 1}'.encode("utf-16-le")
    assert json.loads(with_bom) == json.loads(without_bom) == {"a": 1}  # what this module replaces
    assert _reason(with_bom) == "invalid_utf8"
    assert _reason(without_bom) == "syntax"  # valid UTF-8, but NUL bytes are not JSON


def test_rfc8259_8_1_byte_order_mark_refused() -> None:
    """RFC 8259 §8.1: a byte order mark is not part of a JSON text exchanged here."""
    assert _reason(b"\xef\xbb\xbf{}") == "syntax"


@pytest.mark.parametrize("text", ["NaN", '{"a": Infinity}', "[-Infinity]", "1e400", "-1e400"])
def test_rfc8259_6_non_finite_numbers_refused(text: str) -> None:
    """RFC 8259 §6: NaN and Infinity are not JSON, nor numbers that overflow to them."""
    assert _reason(text) == "non_finite_number"


@pytest.mark.parametrize("text", ['"\\ud800"', '{"\\udc00": 1}', '["ok", ["\\uDBFF x"]]'])
def test_rfc8259_8_2_unpaired_surrogates_refused(text: str) -> None:
    """RFC 8259 §8.2: unpaired surrogates cannot be re-encoded as UTF-8."""
    assert _reason(text) == "lone_surrogate"


def test_rfc8259_8_2_surrogate_pair_is_one_character() -> None:
    """RFC 8259 §7: an escaped surrogate pair decodes to one character."""
    assert loads('"\\ud83d\\ude00"') == "\U0001f600"


@pytest.mark.parametrize("text", ["", "{", "{} {}", "{'a': 1}", '{"a": 1,}', '"tab\there"', "[1] x"])
def test_rfc8259_syntax_errors_refused(text: str) -> None:
    """RFC 8259 §2: anything that is not one JSON text is a syntax error."""
    assert _reason(text) == "syntax"


def test_rfc8259_deep_nesting_refused_without_crashing() -> None:
    """RFC 8259 §9: a parser may limit depth; an attacker's nesting is refused, not a crash."""
    assert _reason("[" * 200_000 + "]" * 200_000) == "too_deep"


def test_guide_json_01_refusal_never_echoes_the_input() -> None:
    """GUIDE-secrets-01: the error and its chain hold no part of the input."""
    secret = "sk_live_do_not_echo"
    with pytest.raises(MalformedJSON) as refused:
        loads('{"token": "' + secret + '", "token": 1}')
    assert secret not in str(refused.value)
    assert secret not in repr(refused.value)
    assert refused.value.__cause__ is None and refused.value.__suppress_context__


def test_loads_returns_plain_values() -> None:
    """Decoded values are plain dict/list/str/int/float/bool/None."""
    assert loads(b'{"a": [1, 2.5, true, null, "x"]}') == {"a": [1, 2.5, True, None, "x"]}
    assert type(loads(b"{}")) is dict


def test_loads_object_requires_an_object() -> None:
    """A protocol document is a JSON object; a top-level array is refused."""
    assert loads_object(b'{"a": 1}') == {"a": 1}
    with pytest.raises(MalformedJSON) as refused:
        loads_object(b"[1]")
    assert refused.value.reason == "not_object"


def test_malformed_json_is_a_value_error() -> None:
    """Callers that already catch ValueError keep working."""
    assert issubclass(MalformedJSON, ValueError)
