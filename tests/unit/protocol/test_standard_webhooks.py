"""frontdoor_protocol.standard_webhooks: the one Standard Webhooks implementation, checked against
the independent `svix` and `standardwebhooks` packages in both directions."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
import standardwebhooks
import svix.webhooks
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from frontdoor_protocol import (
    DEFAULT_WEBHOOK_TOLERANCE,
    WebhookKeys,
    WebhookSignatureError,
    format_public_key,
    format_secret,
    format_signing_key,
    parse_public_key,
    parse_secret,
    parse_signature_header,
    parse_signing_key,
    sign_v1,
    sign_v1a,
    signature_header,
    signed_content,
    verify_webhook_signature,
)

BODY = b'{"type":"operation.perform","timestamp":"2026-12-01T00:00:00.000Z","data":{"idempotency_key":"op_1"}}'
MSG = "msg_01JD00000000000000000000AA"
STAMP = 1_700_000_000
ORACLES = ["standardwebhooks", "svix"]


def secret(size: int = 32) -> str:
    return format_secret(random.randbytes(size))


def key_pair() -> tuple[str, str]:
    private = Ed25519PrivateKey.generate()
    return format_signing_key(private), format_public_key(private.public_key())


def oracle(name: str, whsec: str) -> Any:
    return standardwebhooks.Webhook(whsec) if name == "standardwebhooks" else svix.webhooks.Webhook(whsec)


def oracle_error(name: str) -> type[Exception]:
    return standardwebhooks.WebhookVerificationError if name == "standardwebhooks" else svix.webhooks.WebhookVerificationError


def headers_for(signatures: str, *, msg_id: str = MSG, stamp: int = STAMP) -> dict[str, str]:
    return {"webhook-id": msg_id, "webhook-timestamp": str(stamp), "webhook-signature": signatures}


def keys(secrets: list[str] | None = None, public_keys: list[str] | None = None) -> WebhookKeys:
    return WebhookKeys.parse(secrets or [], public_keys or [])


def refused(verifier: WebhookKeys, headers: Any, body: bytes, *, now: float,
            tolerance: float = DEFAULT_WEBHOOK_TOLERANCE) -> str:
    """The reason verification refuses (the test fails when it accepts or raises anything else)."""
    with pytest.raises(WebhookSignatureError) as raised:
        verify_webhook_signature(verifier, headers, body, now=now, tolerance=tolerance)
    return raised.value.reason


# --- the signed content and v1 -------------------------------------------------------------


def test_the_signed_content_is_id_dot_timestamp_dot_exact_body() -> None:
    assert signed_content(MSG, STAMP, b"\x00{}") == f"{MSG}.{STAMP}.".encode() + b"\x00{}"


def test_the_specification_example_signature() -> None:
    # The example of the Standard Webhooks specification and its reference libraries' tests.
    assert sign_v1("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
                   b'{"test": 2432232314}') == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_v1_is_hmac_sha256_under_the_decoded_secret() -> None:
    whsec = secret()
    key = base64.b64decode(whsec.removeprefix("whsec_"))
    mac = hmac.new(key, f"{MSG}.{STAMP}.".encode() + BODY, hashlib.sha256).digest()
    assert sign_v1(whsec, MSG, STAMP, BODY) == "v1," + base64.b64encode(mac).decode()


@pytest.mark.parametrize("name", ORACLES)
def test_the_oracles_verify_what_we_sign_and_refuse_it_tampered(name: str) -> None:
    whsec, now = secret(), int(time.time())
    headers = headers_for(signature_header([whsec], MSG, now, BODY), stamp=now)
    oracle(name, whsec).verify(BODY, headers)
    for body, changed in ((BODY.replace(b"op_1", b"op_2"), {}), (BODY, {"webhook-id": "msg_other"}),
                          (BODY, {"webhook-timestamp": str(now - 1)})):
        with pytest.raises(oracle_error(name)):
            oracle(name, whsec).verify(body, {**headers, **changed})


@pytest.mark.parametrize("name", ORACLES)
def test_we_verify_what_the_oracles_sign_and_refuse_it_tampered(name: str) -> None:
    whsec, now = secret(), int(time.time())
    signature = oracle(name, whsec).sign(MSG, datetime.fromtimestamp(now, UTC), BODY.decode())
    headers = headers_for(signature, stamp=now)
    assert verify_webhook_signature(keys([whsec]), headers, BODY, now=now) == (MSG, now)
    # The oracles take a secret without its prefix; so does the one parser.
    assert verify_webhook_signature(keys([whsec.removeprefix("whsec_")]), headers, BODY, now=now) == (MSG, now)
    for body, changed in ((BODY + b" ", {}), (BODY, {"webhook-id": "msg_other"}),
                          (BODY, {"webhook-timestamp": str(now + 1)})):
        assert refused(keys([whsec]), {**headers, **changed}, body, now=now) == (
            "bad_signature")
    assert refused(keys([secret()]), headers, BODY, now=now) == "bad_signature"


# --- rotation overlap ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ORACLES)
def test_during_a_rotation_two_signatures_and_either_secret_verifies(name: str) -> None:
    old, new, now = secret(), secret(), int(time.time())
    headers = headers_for(signature_header([new, old], MSG, now, BODY), stamp=now)
    assert len(headers["webhook-signature"].split(" ")) == 2
    for whsec in (old, new):
        oracle(name, whsec).verify(BODY, headers)
        assert verify_webhook_signature(keys([whsec]), headers, BODY, now=now)[0] == MSG
    with pytest.raises(oracle_error(name)):
        oracle(name, secret()).verify(BODY, headers)
    assert refused(keys([secret()]), headers, BODY, now=now) == "bad_signature"
    # A receiver holding both secrets accepts a delivery signed by either alone.
    for whsec in (old, new):
        alone = headers_for(sign_v1(whsec, MSG, now, BODY), stamp=now)
        assert verify_webhook_signature(keys([new, old]), alone, BODY, now=now)[0] == MSG


def test_every_v1_entry_is_compared_with_every_secret_without_an_early_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = secret(), secret()
    calls: list[int] = []
    real = hmac.compare_digest

    def counting(x: bytes, y: bytes) -> bool:
        calls.append(1)
        return real(x, y)

    monkeypatch.setattr(hmac, "compare_digest", counting)  # the module calls hmac.compare_digest
    header = signature_header([a, secret(), secret()], MSG, STAMP, BODY)  # the match comes first
    assert verify_webhook_signature(keys([a, b]), headers_for(header), BODY, now=STAMP)[0] == MSG
    assert len(calls) == 6


# --- v1a (Ed25519) -------------------------------------------------------------------------


def test_v1a_round_trip_and_an_independent_ed25519_check() -> None:
    private, public = key_pair()
    entry = sign_v1a(private, MSG, STAMP, BODY)
    version, _, encoded = entry.partition(",")
    assert version == "v1a" and len(base64.b64decode(encoded)) == 64
    parse_public_key(public).verify(base64.b64decode(encoded), f"{MSG}.{STAMP}.".encode() + BODY)
    with pytest.raises(InvalidSignature):
        parse_public_key(public).verify(base64.b64decode(encoded), f"{MSG}.{STAMP}.".encode() + BODY + b" ")
    assert verify_webhook_signature(keys(public_keys=[public]), headers_for(entry), BODY, now=STAMP) == (MSG, STAMP)
    assert format_signing_key(parse_signing_key(private)) == private
    assert format_public_key(parse_signing_key(private).public_key()) == public


def test_v1a_rotation_either_public_key_verifies_and_v1_sits_beside_it() -> None:
    old_private, old_public = key_pair()
    new_private, new_public = key_pair()
    whsec, now = secret(), int(time.time())
    headers = headers_for(signature_header([whsec, new_private, old_private], MSG, now, BODY), stamp=now)
    assert [entry.split(",")[0] for entry in headers["webhook-signature"].split(" ")] == ["v1", "v1a", "v1a"]
    for public in (old_public, new_public):
        assert verify_webhook_signature(keys(public_keys=[public]), headers, BODY, now=now)[0] == MSG
    assert refused(keys(public_keys=[key_pair()[1]]), headers, BODY, now=now) == (
        "bad_signature")
    for name in ORACLES:  # the oracles skip the v1a entries and verify the v1 one
        oracle(name, whsec).verify(BODY, headers)


@pytest.mark.parametrize("scheme", ["v1", "v1a"])
def test_a_tampered_body_id_or_timestamp_never_verifies(scheme: str) -> None:
    whsec = secret()
    private, public = key_pair()
    verifier = keys([whsec], [public])
    headers = headers_for(signature_header([whsec if scheme == "v1" else private], MSG, STAMP, BODY))
    assert verify_webhook_signature(verifier, headers, BODY, now=STAMP)[0] == MSG
    for body, changed in ((BODY + b" ", {}), (BODY[:-1], {}), (BODY, {"webhook-id": MSG + "B"}),
                          (BODY, {"webhook-timestamp": str(STAMP + 1)})):
        assert refused(verifier, {**headers, **changed}, body, now=STAMP) == (
            "bad_signature")


def test_a_signature_relabelled_to_the_other_scheme_never_verifies() -> None:
    whsec = secret()
    private, public = key_pair()
    verifier = keys([whsec], [public])
    mac = sign_v1(whsec, MSG, STAMP, BODY).removeprefix("v1,")
    ed = sign_v1a(private, MSG, STAMP, BODY).removeprefix("v1a,")
    for entry in (f"v1a,{mac}", f"v1,{ed}", f"v2,{mac}", f"V1,{mac}"):
        assert refused(verifier, headers_for(entry), BODY, now=STAMP) == (
            "bad_signature")


# --- time ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("offset", "reason"), [(-DEFAULT_WEBHOOK_TOLERANCE - 1, "too_old"),
                                                (DEFAULT_WEBHOOK_TOLERANCE + 1, "too_new")])
def test_stale_and_future_timestamps_are_refused_at_the_tolerance(offset: int, reason: str) -> None:
    whsec = secret()
    stamp = STAMP + offset
    headers = headers_for(sign_v1(whsec, MSG, stamp, BODY), stamp=stamp)
    assert refused(keys([whsec]), headers, BODY, now=STAMP) == reason
    edge = STAMP + (offset - 1 if offset > 0 else offset + 1)  # exactly the tolerance away: accepted
    at_edge = headers_for(sign_v1(whsec, MSG, edge, BODY), stamp=edge)
    assert verify_webhook_signature(keys([whsec]), at_edge, BODY, now=STAMP)[1] == edge
    assert refused(keys([whsec]), headers, BODY, now=STAMP, tolerance=10) == reason


@pytest.mark.parametrize("name", ORACLES)
def test_the_oracles_agree_a_stale_delivery_is_refused(name: str) -> None:
    whsec, stale = secret(), int(time.time()) - 3600
    headers = headers_for(sign_v1(whsec, MSG, stale, BODY), stamp=stale)
    with pytest.raises(oracle_error(name)):
        oracle(name, whsec).verify(BODY, headers)
    assert refused(keys([whsec]), headers, BODY, now=time.time()) == "too_old"


# --- malformed headers: refusals with a reason, never a crash, never an echo -----------------


@pytest.mark.parametrize(("headers", "reason"), [
    ({"webhook-timestamp": str(STAMP), "webhook-signature": "v1,x"}, "missing_header"),
    ({"webhook-id": MSG, "webhook-signature": "v1,x"}, "missing_header"),
    ({"webhook-id": MSG, "webhook-timestamp": str(STAMP)}, "missing_header"),
    ({"webhook-id": "  ", "webhook-timestamp": str(STAMP), "webhook-signature": "v1,x"}, "missing_header"),
    ([("webhook-id", MSG), ("Webhook-Id", "msg_2"), ("webhook-timestamp", str(STAMP)),
      ("webhook-signature", "v1,x")], "missing_header"),
    ({"webhook-id": "m" * 256, "webhook-timestamp": str(STAMP), "webhook-signature": "v1,x"}, "missing_header"),
    ({"webhook-id": MSG, "webhook-timestamp": str(STAMP), "webhook-signature": "v1,x" * 3000}, "missing_header"),
    *[({"webhook-id": MSG, "webhook-timestamp": stamp, "webhook-signature": "v1,x"}, "bad_timestamp")
      for stamp in ("soon", "-5", "12.5", "1e9", "²", "１２３", "0x10", "9" * 13)],
], ids=["no-id", "no-timestamp", "no-signature", "blank-id", "repeated-id", "long-id", "long-signature",
        "word", "negative", "fraction", "exponent", "superscript", "fullwidth", "hex", "huge"])
def test_malformed_headers_are_refused_with_their_reason(headers: Any, reason: str) -> None:
    assert refused(keys([secret()]), headers, BODY, now=STAMP) == reason


def test_header_names_are_case_insensitive() -> None:
    whsec = secret()
    headers = headers_for(sign_v1(whsec, MSG, STAMP, BODY))
    shouted = {name.upper(): value for name, value in headers.items()}
    assert verify_webhook_signature(keys([whsec]), shouted, BODY, now=STAMP)[0] == MSG


@pytest.mark.parametrize("garbage", ["", " ", "v1", "v1,", ",", ",,,", "v1,!!!!", "v1,a,b", "v1a,=", "  v1,  ",
                                     "v1," + "A" * 43, "v1a," + base64.b64encode(b"\0" * 64).decode()])
def test_garbage_entries_never_verify_and_do_not_hide_a_good_one(garbage: str) -> None:
    whsec = secret()
    private, public = key_pair()
    verifier = keys([whsec], [public])
    alone = headers_for(garbage.strip() or "v1,x")
    assert refused(verifier, alone, BODY, now=STAMP) == "bad_signature"
    for good in (sign_v1(whsec, MSG, STAMP, BODY), sign_v1a(private, MSG, STAMP, BODY)):
        for header in (f"{garbage} {good}", f"{good} {garbage}"):
            assert verify_webhook_signature(verifier, headers_for(header), BODY, now=STAMP)[0] == MSG


def test_random_header_values_only_ever_raise_the_refusal() -> None:
    rng = random.Random(14)
    verifier = keys([secret()], [key_pair()[1]])
    alphabet = "v1a,= +/-_.0123456789abcXYZ\t\x00é²"
    for _ in range(500):
        headers = {name: "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
                   for name in ("webhook-id", "webhook-timestamp", "webhook-signature")}
        if rng.random() < 0.5:
            headers["webhook-timestamp"] = str(STAMP + rng.randrange(-400, 400))
        with pytest.raises(WebhookSignatureError) as raised:
            verify_webhook_signature(verifier, headers, BODY, now=STAMP)
        for value in headers.values():
            if len(value.strip()) > 3:
                assert value.strip() not in str(raised.value)  # no echo of what was sent


def test_parse_signature_header_keeps_well_formed_entries_in_order() -> None:
    mac = base64.b64encode(b"\1" * 32).decode()
    assert parse_signature_header(f"v1,{mac}  v1a,{mac} junk v1,!! v9,{mac} ,{mac}") == [
        ("v1", b"\1" * 32), ("v1a", b"\1" * 32), ("v9", b"\1" * 32)]


# --- secrets and keys: one strict parser, never echoed ---------------------------------------


def test_a_secret_is_24_to_64_bytes_with_or_without_its_prefix() -> None:
    for size in (24, 32, 64):
        whsec = secret(size)
        assert parse_secret(whsec) == parse_secret(whsec.removeprefix("whsec_")) and len(parse_secret(whsec)) == size
    for size in (0, 16, 23, 65, 128):
        with pytest.raises(ValueError, match="24 to 64"):
            parse_secret("whsec_" + base64.b64encode(b"k" * size).decode())
        with pytest.raises(ValueError, match="24 to 64"):
            format_secret(b"k" * size)


_VALID = "whsec_" + base64.b64encode(b"s3cr3t-material-0123456789ab").decode()


@pytest.mark.parametrize("bad", [
    "", "not-a-secret-value", _VALID + "!", _VALID[:-2], _VALID.replace("whsec_", "whsec_ "), "whsec_" + "A" * 33,
    "whpk_" + base64.b64encode(b"p" * 32).decode(), "whsk_" + base64.b64encode(b"q" * 32).decode(),
])
def test_a_malformed_secret_is_refused_without_being_echoed(bad: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_secret(bad)
    message = str(raised.value)
    assert "secret" in message
    tail = bad.partition("_")[2][:8]
    assert not bad or (bad not in message and (not tail or tail not in message))
    with pytest.raises(ValueError) as signed:
        sign_v1(bad, MSG, STAMP, BODY)
    assert str(signed.value) == message  # the same parser behind signing and verifying


def test_non_string_secrets_and_keys_are_refused_as_values() -> None:
    for bad in (None, b"whsec_abc", 42):
        for parse in (parse_secret, parse_public_key, parse_signing_key):
            with pytest.raises(ValueError):
                parse(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("parse,prefix,other", [(parse_public_key, "whpk_", "whsk_"), (parse_signing_key, "whsk_", "whpk_")])
def test_ed25519_keys_are_their_prefix_and_32_bytes(parse: Callable[[str], object], prefix: str, other: str) -> None:
    raw = base64.b64encode(b"\7" * 32).decode()
    assert parse(prefix + raw)
    for bad in ("", raw, other + raw, prefix + "not base64!", prefix + base64.b64encode(b"\7" * 31).decode(),
                prefix + base64.b64encode(b"\7" * 33).decode(), secret()):
        with pytest.raises(ValueError, match=prefix) as raised:
            parse(bad)
        assert not bad or bad not in str(raised.value)


def test_signing_needs_a_secret_and_picks_the_scheme_by_prefix() -> None:
    with pytest.raises(ValueError, match="at least one"):
        signature_header([], MSG, STAMP, BODY)
    whsec = secret()
    private, _ = key_pair()
    assert signature_header([private, whsec], MSG, STAMP, BODY) == (
        f"{sign_v1a(private, MSG, STAMP, BODY)} {sign_v1(whsec, MSG, STAMP, BODY)}")


def test_webhook_keys_never_show_a_secret() -> None:
    whsec = secret()
    shown = repr(keys([whsec, secret()], [key_pair()[1]]))
    assert shown == "WebhookKeys(2 secret(s), 1 public key(s))"
    assert whsec.removeprefix("whsec_") not in shown and "b'" not in shown
    assert refused(WebhookKeys(), headers_for(sign_v1(whsec, MSG, STAMP, BODY)),
                                                     BODY, now=STAMP) == "bad_signature"
