"""Personal agents as OAuth clients (PAP §4.1): who they are, and which ones a tenant accepts.

- `AgentDirectory` resolves a ``client_id`` to its validated Client ID Metadata Document
  and public keys, fetched through the SSRF-safe `SafeFetcher`, cached within bounds.
- `validate_client_metadata` and `parse_jwks` are the pure rules behind it.
- `agent_policy` and `agents` are the per-tenant policy (open or allowlist, blocklist) and
  the record of every agent seen.

No web framework and no task queue here: the issuer's token endpoint calls these.
"""

from frontdoor_identity.agent_directory import AgentDirectory, Fetcher, ResolvedClient
from frontdoor_identity.agent_keys import AgentKeys, DelegatedKeyBounds, DelegatedKeyDirectory
from frontdoor_identity.agent_policy import (
    ALLOWED_SQL,
    MAX_ALLOWLIST,
    AgentPolicy,
    PolicyMode,
    allow_agent,
    disallow_agent,
    get_agent_policy,
    is_allowed,
    set_agent_policy_mode,
)
from frontdoor_identity.agents import (
    MAX_PAGE,
    SEEN_WRITE_INTERVAL,
    Agent,
    AgentCursor,
    block_agent,
    get_agent,
    list_agents,
    record_seen,
    record_seen_delegated,
    require_client_id_url,
    unblock_agent,
)
from frontdoor_identity.cache_lifetime import CacheBounds, cache_lifetime
from frontdoor_identity.client_metadata import (
    MAX_CLIENT_NAME_LENGTH,
    AgentExtension,
    ClientMetadata,
    check_client_id,
    url_host,
    validate_client_metadata,
)
from frontdoor_identity.errors import ClientResolutionError, InvalidClientMetadata, ResolutionReason, Stage
from frontdoor_identity.jwks import MAX_KEYS, parse_jwks
from frontdoor_identity.loopback_redirect import is_loopback_redirect, loopback_redirect_matches

__all__ = [
    "AgentKeys",
    "DelegatedKeyBounds",
    "DelegatedKeyDirectory",
    "ALLOWED_SQL",
    "MAX_ALLOWLIST",
    "MAX_CLIENT_NAME_LENGTH",
    "MAX_KEYS",
    "MAX_PAGE",
    "SEEN_WRITE_INTERVAL",
    "Agent",
    "AgentCursor",
    "AgentDirectory",
    "AgentExtension",
    "AgentPolicy",
    "CacheBounds",
    "ClientMetadata",
    "ClientResolutionError",
    "Fetcher",
    "InvalidClientMetadata",
    "PolicyMode",
    "ResolutionReason",
    "ResolvedClient",
    "Stage",
    "allow_agent",
    "block_agent",
    "cache_lifetime",
    "check_client_id",
    "disallow_agent",
    "get_agent",
    "get_agent_policy",
    "is_allowed",
    "is_loopback_redirect",
    "list_agents",
    "loopback_redirect_matches",
    "parse_jwks",
    "record_seen",
    "record_seen_delegated",
    "require_client_id_url",
    "set_agent_policy_mode",
    "unblock_agent",
    "url_host",
    "validate_client_metadata",
]
