"""PAP Sessions: the grants of the token endpoint, Session Tokens, sign-in and Account
Tokens, Device Sign-In state, Direct Sign-In codes, revocation and disconnect, replay caches, introspection,
feedback."""

from .account_tokens import AccountTokenRecord, find_account_token, looks_like_account_token
from .authorization_code_grant import AuthorizationCodeGrant, s256_challenge
from .authorization_codes import CODE_LIFETIME_S, AuthorizationCodeStore, CodeTake, IssuedCode
from .client_auth import AuthenticatedClient, authenticate_client
from .delegated_caller import (
    AgentRefused,
    DelegatedCallers,
    DelegatedRefusal,
    VerifiedDelegatedCaller,
    accepted_agent_keys,
)
from .device_authorization import DeviceAuthorization
from .device_flow import (
    USER_CODE_ALPHABET,
    DevicePoll,
    DeviceRequest,
    DeviceStart,
    DeviceStore,
    format_user_code,
    normalize_user_code,
)
from .device_grant import DeviceCodeGrant
from .disconnect import MAX_ACCOUNT_ID, disconnect_account, disconnect_agent
from .dpop_nonce import NonceSource
from .introspection import INACTIVE, introspect
from .introspection_cache import IntrospectionCache, publish_head
from .join_codes import JOIN_CODE_LIFETIME_S, JoinCodeStore, JoinGrant, JoinRedemption
from .mediated_grant import MediatedCaller, MediatedSignIns
from .new_session_admission import Admission, NewSessionRefused
from .refresh_grant import RefreshGrant
from .replay_cache import ReplayCache
from .resource_credentials import (
    CreatedCredential,
    CredentialView,
    authenticate_credential,
    create_credential,
    credential_trusted,
    identify_credential,
    list_credentials,
    revoke_credential,
)
from .revocation import Revocation, RevocationRequest, RevocationSummary, revoke_sign_ins
from .security_events import EVENTS_SUPPORTED, SET_TYPE, sign_set
from .session_events import EVENTS_CHANNEL, EventType, OutboxEvent, mark_forwarded, pending_events, record_event
from .session_grant import SessionGrant
from .session_store import SessionRecord, create_session, end_sessions_of_agent, find_session, touch_session
from .sign_in import SignInResult, SignInType, allowed_scopes, complete_sign_in, requested_scopes
from .sign_in_attempts import (
    AttemptStage,
    device_attempt_id,
    new_attempt_id,
    record_decision,
    record_prompt,
    record_stage,
)
from .signer_cache import IssuerKeys
from .ssf_stream import (
    PollState,
    StoredEvent,
    Stream,
    StreamPolicy,
    StreamWakeups,
    acknowledge,
    await_streams,
    create_stream,
    events_after,
    find_stream,
    grant_lease,
    head_seq,
)
from .token_binding import TokenBinding, bind_token
from .token_endpoint import Grant, GrantDeps, GrantOutcome, GrantRefused, OneTimeValue, TenantIssuer
from .token_request import (
    AUTHORIZATION_CODE,
    CLIENT_ASSERTION_TYPE,
    DEVICE_CODE,
    JWT_BEARER,
    REFRESH_TOKEN,
    TokenRequest,
)
from .token_response import session_token_response

__all__ = [
    "EVENTS_SUPPORTED",
    "SET_TYPE",
    "PollState",
    "StoredEvent",
    "Stream",
    "StreamPolicy",
    "StreamWakeups",
    "acknowledge",
    "await_streams",
    "create_stream",
    "events_after",
    "find_stream",
    "grant_lease",
    "head_seq",
    "sign_set",
    "JOIN_CODE_LIFETIME_S",
    "Admission",
    "NewSessionRefused",
    "AgentRefused",
    "DelegatedCallers",
    "accepted_agent_keys",
    "DelegatedRefusal",
    "JoinCodeStore",
    "JoinGrant",
    "JoinRedemption",
    "VerifiedDelegatedCaller",
    "OutboxEvent",
    "MediatedCaller",
    "MediatedSignIns",
    "AUTHORIZATION_CODE",
    "CLIENT_ASSERTION_TYPE",
    "CODE_LIFETIME_S",
    "DEVICE_CODE",
    "INACTIVE",
    "IntrospectionCache",
    "JWT_BEARER",
    "MAX_ACCOUNT_ID",
    "REFRESH_TOKEN",
    "USER_CODE_ALPHABET",
    "AccountTokenRecord",
    "AuthenticatedClient",
    "AuthorizationCodeGrant",
    "AuthorizationCodeStore",
    "CodeTake",
    "CreatedCredential",
    "CredentialView",
    "DeviceAuthorization",
    "DeviceCodeGrant",
    "DevicePoll",
    "DeviceRequest",
    "DeviceStart",
    "DeviceStore",
    "EVENTS_CHANNEL",
    "EventType",
    "Grant",
    "GrantDeps",
    "GrantOutcome",
    "GrantRefused",
    "IssuedCode",
    "IssuerKeys",
    "NonceSource",
    "OneTimeValue",
    "RefreshGrant",
    "ReplayCache",
    "Revocation",
    "RevocationRequest",
    "RevocationSummary",
    "SessionGrant",
    "SessionRecord",
    "SignInResult",
    "SignInType",
    "AttemptStage",
    "device_attempt_id",
    "new_attempt_id",
    "record_decision",
    "record_prompt",
    "record_stage",
    "TenantIssuer",
    "TokenBinding",
    "TokenRequest",
    "allowed_scopes",
    "authenticate_client",
    "authenticate_credential",
    "bind_token",
    "complete_sign_in",
    "create_credential",
    "credential_trusted",
    "create_session",
    "disconnect_account",
    "disconnect_agent",
    "end_sessions_of_agent",
    "find_account_token",
    "find_session",
    "format_user_code",
    "identify_credential",
    "introspect",
    "publish_head",
    "list_credentials",
    "looks_like_account_token",
    "normalize_user_code",
    "mark_forwarded",
    "pending_events",
    "record_event",
    "requested_scopes",
    "revoke_credential",
    "revoke_sign_ins",
    "s256_challenge",
    "session_token_response",
    "touch_session",
]
