"""The rules of PAP §7 (`frontdoor_conversations.rules`), one requirement at a time."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from frontdoor_conversations.rules import (
    MAX_DELTA_CHARS,
    MAX_MESSAGE_BYTES,
    Caller,
    ConversationView,
    IncomingMessage,
    authorization_event,
    check_delta,
    check_direct_parent,
    check_open,
    check_owner,
    message_digest,
    on_close,
    on_company_message,
    on_handoff,
    on_responder,
    on_user_message,
    parse_message,
    parse_wait,
    replay_decision,
    user_scope,
)
from frontdoor_protocol import ErrorCode, ProtocolError

AGENT = "https://atlas.example/client.json"
ME = Caller(client_id=AGENT, user_id="usr_1", session_id="ses_1")
SIGNED_IN = msgspec.structs.replace(ME, account="acct_ada", scopes=frozenset({"orders:read"}))


def conversation(**over: Any) -> ConversationView:
    fields: dict[str, Any] = {"id": "cnv_1", "client_id": AGENT, "user_id": "usr_1", "account_id": None,
                              "parent_id": None, "direct_child_id": None, "status": "idle", "responder": "agent"}
    fields.update(over)
    return ConversationView(**fields)


def code(error: ProtocolError | None) -> str | None:
    return None if error is None else str(error.code)


# PAP-7.2-01: the Company MUST reject requests from any other client_id, User, or account.

def test_pap_7_2_01_another_agent_or_user_is_an_unknown_conversation() -> None:
    assert check_owner(conversation(), ME) is None
    other_agent = msgspec.structs.replace(ME, client_id="https://other.example/client.json")
    other_user = msgspec.structs.replace(ME, user_id="usr_2")
    for caller in (other_agent, other_user):
        assert code(check_owner(conversation(), caller)) == ErrorCode.CONVERSATION_NOT_FOUND
    # GUIDE-co-errors-01: the same refusal as a conversation that does not exist.
    assert check_owner(conversation(), other_user) == check_owner(None, ME)


def test_pap_7_2_01_an_accounts_conversation_refuses_signed_out_and_other_accounts() -> None:
    mine = conversation(account_id="acct_ada")
    assert check_owner(mine, SIGNED_IN) is None
    # GUIDE-co-conv-02: signed out is asked to sign in (the conversation stays open).
    assert code(check_owner(mine, ME)) == ErrorCode.SIGN_IN_REQUIRED
    grace = msgspec.structs.replace(SIGNED_IN, account="acct_grace")
    assert code(check_owner(mine, grace)) == ErrorCode.CONVERSATION_NOT_FOUND


# PAP-7.2-03: beyond the alphabet, the sender's ID format is its own.

@pytest.mark.parametrize("message_id", ["msg_x", "a", "M-1_b", "x" * 256, "0123"])
def test_pap_7_2_03_any_id_of_the_alphabet_is_accepted(message_id: str) -> None:
    assert parse_message({"id": message_id, "sender": "agent", "text": "Hi"}).id == message_id


@pytest.mark.parametrize("message_id", ["", "x" * 257, "msg 1", "msg/1", "msg.1", 7, None])
def test_pap_7_2_03_ids_outside_the_alphabet_are_refused(message_id: object) -> None:
    with pytest.raises(ProtocolError) as raised:
        parse_message({"id": message_id, "sender": "agent", "text": "Hi"})
    assert raised.value.code == ErrorCode.INVALID_REQUEST


# PAP-7.3-01: message IDs are unique for the user: a retry replays, a changed body conflicts.

def test_pap_7_3_01_retry_replays_and_reuse_conflicts() -> None:
    message = IncomingMessage(id="msg_1", sender="agent", text="Hello.")
    digest = message_digest(message)
    assert replay_decision(None, digest) == "new"
    assert replay_decision(("cnv_1", digest), digest) == "replay"
    assert replay_decision(("cnv_1", digest), digest, conversation_id="cnv_1") == "replay"
    changed = message_digest(msgspec.structs.replace(message, text="Something else."))
    assert code(replay_decision(("cnv_1", digest), changed)) == ErrorCode.MESSAGE_ID_CONFLICT  # type: ignore[arg-type]
    moved = replay_decision(("cnv_1", digest), digest, conversation_id="cnv_2")
    assert code(moved) == ErrorCode.MESSAGE_ID_CONFLICT  # type: ignore[arg-type]
    # A start under another parent is another message.
    assert message_digest(message, parent_id="cnv_9") != digest


def test_pap_7_3_01_the_id_space_is_the_agent_and_user() -> None:
    assert user_scope(ME) != user_scope(msgspec.structs.replace(ME, user_id="usr_2"))
    assert user_scope(ME) != user_scope(msgspec.structs.replace(ME, client_id="https://b.example/c.json"))
    assert user_scope(ME) == user_scope(msgspec.structs.replace(ME, session_id="ses_2"))


# PAP-7.4-01: a message MUST have at least one of text, data, or context.

def test_pap_7_4_01_a_message_needs_content() -> None:
    with pytest.raises(ProtocolError):
        parse_message({"id": "m1", "sender": "agent"})
    for content in ({"text": "Hi"}, {"data": {"sku": "NW-CHAI"}}, {"context": {"locale": "en-US"}}):
        assert parse_message({"id": "m1", "sender": "agent", **content})


def test_the_sender_never_sets_role_and_sender_is_agent_or_human() -> None:
    with pytest.raises(ProtocolError):
        parse_message({"id": "m1", "sender": "agent", "role": "company", "text": "Trust me"})
    with pytest.raises(ProtocolError):
        parse_message({"id": "m1", "sender": "company", "text": "Hi"})
    with pytest.raises(ProtocolError):
        parse_message({"id": "m1", "text": "Hi"})


def test_messages_are_limited_in_size() -> None:
    at_limit = {"id": "m1", "sender": "agent", "text": ""}
    at_limit["text"] = "x" * (MAX_MESSAGE_BYTES - len(msgspec.json.encode(at_limit)))
    assert parse_message(at_limit)
    with pytest.raises(ProtocolError):
        parse_message({**at_limit, "text": at_limit["text"] + "x"})


# PAP-7.4-03: context facts use their defined fields and formats.

@pytest.mark.parametrize("context", [{"locale": "en US"}, {"locale": 5}, {"time_zone": "Not a zone!"},
                                     {"user_available": "yes"}])
def test_pap_7_4_03_context_facts_have_their_formats(context: dict[str, Any]) -> None:
    with pytest.raises(ProtocolError):
        parse_message({"id": "m1", "sender": "agent", "context": context})


def test_pap_7_4_03_well_formed_context_is_kept() -> None:
    context = {"locale": "fr-CA", "time_zone": "America/Montreal", "user_available": True, "other": 1}
    assert parse_message({"id": "m1", "sender": "agent", "context": context}).context == context


# PAP-7.7-01/-02 and PAP-7.8-01: status, responder, and who wrote each message.

def test_pap_7_8_01_the_users_message_keeps_its_sender_with_role_user() -> None:
    words = IncomingMessage(id="m1", sender="human", text="My own words")
    change = on_user_message(conversation(), words)
    assert change.events[0] == {"type": "message", "message": {"id": "m1", "sender": "human", "role": "user",
                                                               "text": "My own words"}}


def test_pap_7_7_01_a_message_to_the_agent_makes_it_working_with_a_state_event() -> None:
    change = on_user_message(conversation(), IncomingMessage(id="m1", sender="agent", text="Hi"))
    assert change.status == "working"
    assert change.events[-1] == {"type": "state", "status": "working", "responder": "agent"}
    again = on_user_message(conversation(status="working"), IncomingMessage(id="m2", sender="agent", text="Hi"))
    assert [e["type"] for e in again.events] == ["message"]  # no change of status, no state event


def test_a_message_while_queued_or_with_a_person_keeps_the_status() -> None:
    queued = on_user_message(conversation(status="queued"), IncomingMessage(id="m1", sender="agent", text="Hi"))
    assert queued.status == "queued" and len(queued.events) == 1
    human = on_user_message(conversation(responder="human"), IncomingMessage(id="m1", sender="agent", text="Hi"))
    assert human.status == "idle" and human.responder == "human"


def test_pap_7_7_02_a_company_message_carries_sender_and_ends_the_turn() -> None:
    change = on_company_message(conversation(status="working"), {"id": "r1", "text": "Hello"}, sender="agent")
    assert change.events[0]["message"] == {"id": "r1", "text": "Hello", "sender": "agent", "role": "company"}
    assert change.status == "idle" and change.events[-1]["type"] == "state"
    partial = on_company_message(conversation(status="working"), {"id": "r1", "text": "…"}, sender="agent",
                                 done=False)
    assert partial.status == "working" and len(partial.events) == 1
    human = on_company_message(conversation(responder="human"), {"id": "r2", "text": "I'm Sam"}, sender="human")
    assert human.events[0]["message"]["sender"] == "human"


# §7.9 handoff, responder changes, §7.12 close.

def test_handoff_queues_once() -> None:
    change = on_handoff(conversation())
    assert change is not None and change.status == "queued"
    assert change.events == ({"type": "state", "status": "queued", "responder": "agent"},)
    assert on_handoff(conversation(status="queued")) is None
    assert on_handoff(conversation(responder="human")) is None


def test_a_person_takes_over_and_hands_back() -> None:
    taken = on_responder(conversation(status="queued"), "human")
    assert taken is not None and (taken.status, taken.responder) == ("idle", "human")
    assert on_responder(conversation(responder="human"), "human") is None
    back = on_responder(conversation(responder="human"), "agent")
    assert back is not None and back.events[-1] == {"type": "state", "status": "idle", "responder": "agent"}


def test_close_is_final_and_once() -> None:
    change = on_close(conversation())
    assert change is not None and change.status == "closed"
    assert on_close(conversation(status="closed")) is None
    assert code(check_open(conversation(status="closed"))) == ErrorCode.CONVERSATION_CLOSED


# PAP-7.10-01: a Direct Conversation's parent is open, the caller's, and not direct itself.

def test_pap_7_10_01_direct_conversation_parent() -> None:
    assert check_direct_parent(conversation(), ME) is None
    assert code(check_direct_parent(conversation(status="closed"), ME)) == ErrorCode.CONVERSATION_CLOSED
    assert code(check_direct_parent(conversation(parent_id="cnv_0"), ME)) == ErrorCode.CONVERSATION_NOT_FOUND
    assert code(check_direct_parent(conversation(user_id="usr_2"), ME)) == ErrorCode.CONVERSATION_NOT_FOUND
    assert code(check_direct_parent(conversation(direct_child_id="cnv_2"), ME)) == ErrorCode.DIRECT_CONVERSATION_OPEN
    assert code(check_direct_parent(None, ME)) == ErrorCode.CONVERSATION_NOT_FOUND


def test_pap_7_10_01_an_open_direct_conversation_holds_the_parent() -> None:
    assert code(check_open(conversation(direct_child_id="cnv_2"))) == ErrorCode.DIRECT_CONVERSATION_OPEN


# GUIDE-pa-conv-01: long polls up to 30 seconds.

def test_wait_is_bounded_and_an_integer() -> None:
    assert parse_wait(None) == 0 and parse_wait("0") == 0 and parse_wait("12") == 12
    assert parse_wait("600") == 30
    for bad in ("-1", "1.5", "soon", "9" * 10):
        assert isinstance(parse_wait(bad), ProtocolError)


def test_a_text_delta_names_its_reply_and_carries_some_text() -> None:
    """§7.6: a delta is display only (PAP-7.6-01 binds the agent); the company's side checks its shape."""
    assert check_delta("r-1", "Looking") is None
    assert check_delta("r-1", "x" * MAX_DELTA_CHARS) is None
    for message_id, text in (("r-1", ""), ("r-1", "x" * (MAX_DELTA_CHARS + 1)), ("no spaces", "x"), ("", "x"),
                             (None, "x"), ("r-1", None), ("r-1", 7)):
        assert check_delta(message_id, text) is not None


def test_an_authorization_event_names_the_scopes_and_why() -> None:
    """PAP-7.11-01: the company adds an authorization event when its agent needs the user's account."""
    assert authorization_event("orders:read") == {"type": "authorization", "error": "sign_in_required",
                                                  "scope": "orders:read"}
    assert authorization_event("orders:read orders:write", "insufficient_scope") == {
        "type": "authorization", "error": "insufficient_scope", "scope": "orders:read orders:write"}
    for scope, error in ((" ", "sign_in_required"), ("", "sign_in_required"), ("s" * 1001, "sign_in_required"),
                         (None, "sign_in_required"), ("orders:read", "invalid_token")):
        assert isinstance(authorization_event(scope, error), str)
