"""Frontdoor's company sdk: protect your API and MCP server with PAP Session Tokens.

Depends on ``frontdoor-protocol`` only among Frontdoor's packages, so a company installs
it alone. The Litestar integration is in :mod:`frontdoor_sdk.litestar` (the ``litestar``
extra). Callers import from here, not from the modules.
"""

from frontdoor_sdk.caller import Caller, Profile, check_scopes
from frontdoor_sdk.clock import Clock
from frontdoor_sdk.dpop_nonces import DPoPNonces, RotatingDPoPNonces
from frontdoor_sdk.forwarding import CREDENTIAL_HEADERS, strip_credentials
from frontdoor_sdk.introspection import SessionState
from frontdoor_sdk.mcp_tools import called_tool_scopes
from frontdoor_sdk.middleware import STATE_KEY, FrontdoorMiddleware, Protect, Requirement, caller_of
from frontdoor_sdk.protected_resource import (
    PROTECTED_RESOURCE_WELL_KNOWN,
    company_protected_resource_metadata,
    protected_resource_metadata,
    protected_resource_metadata_url,
    resource_origin,
)
from frontdoor_sdk.refusal import Refusal, challenge, delegated_refusal, mcp_challenge, refusal
from frontdoor_sdk.replay_cache import InMemoryReplayCache, ReplayCache
from frontdoor_sdk.request_url import request_url
from frontdoor_sdk.signals import CachedSession, SessionSignals
from frontdoor_sdk.verifier import FrontdoorVerifier

__all__ = [
    "CREDENTIAL_HEADERS",
    "PROTECTED_RESOURCE_WELL_KNOWN",
    "STATE_KEY",
    "Caller",
    "Clock",
    "DPoPNonces",
    "FrontdoorMiddleware",
    "FrontdoorVerifier",
    "InMemoryReplayCache",
    "Profile",
    "Protect",
    "Refusal",
    "ReplayCache",
    "Requirement",
    "RotatingDPoPNonces",
    "SessionState",
    "SessionSignals",
    "CachedSession",
    "called_tool_scopes",
    "caller_of",
    "challenge",
    "check_scopes",
    "company_protected_resource_metadata",
    "delegated_refusal",
    "mcp_challenge",
    "protected_resource_metadata",
    "protected_resource_metadata_url",
    "refusal",
    "request_url",
    "resource_origin",
    "strip_credentials",
]

from frontdoor_sdk.accounts import (
    AccountsCredentialRefused,
    AccountsRequestRefused,
    AccountsUnavailable,
    ConnectedAgent,
    DisconnectResult,
    FrontdoorAccounts,
    FrontdoorAccountsError,
)
from frontdoor_sdk.agent_keys import AgentKeysRefused, AgentKeysUnavailable, AgentRefused
from frontdoor_sdk.browser_join import (
    BROWSER_COOKIE,
    BrowserAnswer,
    BrowserJoin,
    BrowserSession,
    BrowserStateUnavailable,
    BrowserView,
)
from frontdoor_sdk.jwks_cache import JwksUnavailable
from frontdoor_sdk.ledger import (
    OPERATIONS_EXTENSION,
    FrontdoorLedger,
    LedgerCredentialRefused,
    LedgerError,
    LedgerRecord,
    LedgerRefused,
    LedgerUnavailable,
    OperationDetails,
    OperationList,
    ProposeResult,
    operation_accepted,
)
from frontdoor_sdk.login_handoff import (
    IssuerKeySource,
    LoginHandoffError,
    LoginHandoffReason,
    LoginRequest,
    build_login_response,
    issuer_key_source,
    login_jwks,
    login_signing_key,
    verify_login_request,
)
from frontdoor_sdk.mediated import (
    RELAY_TYPE,
    RelayRefused,
    RelayRefusedReason,
    RelayRequest,
    relay_code_required,
    relay_complete,
    relay_expired,
    relay_failed,
    verify_relay_request,
)
from frontdoor_sdk.session_state import DelegatedState, SessionStateRefused, SessionStateUnavailable
from frontdoor_sdk.webhooks import (
    WebhookEvent,
    WebhookRefusedReason,
    WebhookVerificationError,
    WebhookVerifier,
    sign_webhook,
)

__all__ += [
    "IssuerKeySource",
    "JwksUnavailable",
    "LoginHandoffError",
    "LoginHandoffReason",
    "LoginRequest",
    "build_login_response",
    "issuer_key_source",
    "login_jwks",
    "login_signing_key",
    "verify_login_request",
]

__all__ += [
    "BROWSER_COOKIE",
    "BrowserAnswer",
    "BrowserJoin",
    "BrowserSession",
    "BrowserStateUnavailable",
    "BrowserView",
]

__all__ += [
    "AccountsCredentialRefused",
    "AccountsRequestRefused",
    "AccountsUnavailable",
    "ConnectedAgent",
    "DisconnectResult",
    "FrontdoorAccounts",
    "FrontdoorAccountsError",
]

__all__ += [
    "RELAY_TYPE",
    "RelayRefused",
    "RelayRefusedReason",
    "RelayRequest",
    "relay_code_required",
    "relay_complete",
    "relay_expired",
    "relay_failed",
    "verify_relay_request",
]

__all__ += [
    "OPERATIONS_EXTENSION",
    "FrontdoorLedger",
    "LedgerCredentialRefused",
    "LedgerError",
    "LedgerRecord",
    "LedgerRefused",
    "LedgerUnavailable",
    "OperationDetails",
    "OperationList",
    "ProposeResult",
    "operation_accepted",
]

__all__ += [
    "WebhookEvent",
    "WebhookRefusedReason",
    "WebhookVerificationError",
    "WebhookVerifier",
    "sign_webhook",
]

__all__ += [
    "AgentKeysRefused",
    "AgentKeysUnavailable",
    "AgentRefused",
    "DelegatedState",
    "SessionStateRefused",
    "SessionStateUnavailable",
]

# PAP 1.0: the callback Frontdoor's hosted browser join ends at (ADR 0004 §8).
from frontdoor_sdk.join_callback import (  # noqa: E402
    JOIN_COOKIE,
    JoinAnswer,
    JoinCallback,
    JoinedBrowser,
    JoinStateUnavailable,
    JoinView,
)

__all__ += ["JOIN_COOKIE", "JoinAnswer", "JoinCallback", "JoinStateUnavailable", "JoinView", "JoinedBrowser"]

# Hosted conversations: your support agent behind Frontdoor's conversation endpoint (PAP §7).
from frontdoor_sdk.conversations import ConversationMessage, FrontdoorConversations  # noqa: E402

__all__ += ["ConversationMessage", "FrontdoorConversations"]
