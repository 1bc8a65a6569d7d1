"""Safe outbound HTTP: the only way Frontdoor fetches URLs chosen by someone else.

Agent metadata documents, JWKS, a company's ``/.well-known/poppy.json`` and webhook
deliveries all go through `SafeFetcher`, which refuses non-HTTPS URLs and non-public
addresses (checked on the address actually connected to), and bounds redirects,
size and time (protocol §4.1).
"""

from __future__ import annotations

from .address import IPAddress, embedded_ipv4, is_public_address, parse_ip
from .address_rules import AddressRules, is_loopback_host
from .fetch_error import FetchError, FetchErrorCode
from .fetch_result import FetchResult
from .guarded_backend import GuardedNetworkBackend
from .guarded_transport import GuardedTransport, strict_ssl_context
from .media_type import media_type_matches
from .policy import DEFAULT_USER_AGENT, OutboundPolicy, user_agent
from .resolver import Resolver, SystemResolver
from .safe_fetcher import SafeFetcher
from .target_url import MAX_URL_LENGTH, check_target

__all__ = [
    "DEFAULT_USER_AGENT",
    "MAX_URL_LENGTH",
    "AddressRules",
    "FetchError",
    "FetchErrorCode",
    "FetchResult",
    "GuardedNetworkBackend",
    "GuardedTransport",
    "IPAddress",
    "OutboundPolicy",
    "Resolver",
    "SafeFetcher",
    "SystemResolver",
    "check_target",
    "embedded_ipv4",
    "is_loopback_host",
    "is_public_address",
    "media_type_matches",
    "parse_ip",
    "strict_ssl_context",
    "user_agent",
]
