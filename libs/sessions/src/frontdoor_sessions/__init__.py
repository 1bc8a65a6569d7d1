"""PAP Sessions: the Session grant, Session Tokens, replay caches, introspection, feedback."""

from .dpop_nonce import NonceSource
from .introspection import INACTIVE, introspect
from .replay_cache import ReplayCache
from .resource_credentials import (
    CreatedCredential,
    CredentialView,
    authenticate_credential,
    create_credential,
    list_credentials,
    revoke_credential,
)
from .session_grant import GrantOutcome, GrantRefused, SessionGrant, TenantIssuer
from .session_store import SessionRecord, create_session, end_sessions_of_agent, find_session, touch_session
from .signer_cache import IssuerKeys
from .token_request import CLIENT_ASSERTION_TYPE, JWT_BEARER, TokenRequest

__all__ = [
    "CLIENT_ASSERTION_TYPE",
    "INACTIVE",
    "JWT_BEARER",
    "CreatedCredential",
    "CredentialView",
    "GrantOutcome",
    "GrantRefused",
    "IssuerKeys",
    "NonceSource",
    "ReplayCache",
    "SessionGrant",
    "SessionRecord",
    "TenantIssuer",
    "TokenRequest",
    "authenticate_credential",
    "create_credential",
    "create_session",
    "end_sessions_of_agent",
    "find_session",
    "introspect",
    "list_credentials",
    "revoke_credential",
    "touch_session",
]
