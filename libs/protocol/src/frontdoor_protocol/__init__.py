"""Personal Agent Protocol wire types, profiles and pure verification rules.

Pure: no I/O, no framework, no other Frontdoor package. Callers import from here, not
from the modules.
"""

from frontdoor_protocol.authorization_server_metadata import (
    CLIENT_AUTH_METHOD,
    METADATA_WELL_KNOWN,
    AuthorizationServerMetadata,
    GrantType,
    build_metadata,
    metadata_url,
)
from frontdoor_protocol.discovery_builder import DiscoveryInputs, InvalidDiscoveryInputs, build_discovery_document
from frontdoor_protocol.discovery_check import check_discovery_document
from frontdoor_protocol.discovery_document import (
    ApiListing,
    ApiType,
    Auth,
    CompanyAgent,
    ConversationProtocol,
    DiscoveryDocument,
    ExtensionDescriptor,
    Feedback,
    MediatedField,
    MediatedSignIn,
    Organization,
    SignInOffer,
    Web,
    discovery_url,
)
from frontdoor_protocol.domain_name import domains_equal, is_domain_name, normalize_domain
from frontdoor_protocol.errors import CATALOGUE, ChallengeScheme, ErrorCode, ErrorEntry, ProtocolError, Surface
from frontdoor_protocol.extension_name import OPERATIONS_EXTENSION, ExtensionNameKind, extension_name_kind
from frontdoor_protocol.finding import Finding, FindingCode, Findings, Severity, has_errors
from frontdoor_protocol.https_url import UrlProblem, check_https_url, host_of, https_url_problem
from frontdoor_protocol.jws_algorithm import ASYMMETRIC_JWS_ALGORITHMS, REQUIRED_DPOP_ALGORITHM, is_asymmetric_algorithm
from frontdoor_protocol.metadata_check import check_metadata
from frontdoor_protocol.profile import (
    PROFILE_0_2,
    PROFILES,
    AssertionAudience,
    Profile,
    SessionCredential,
    UnsupportedProtocolVersion,
    parse_protocol_version,
    profile_for,
)
from frontdoor_protocol.scopes import (
    BUILT_IN_SCOPES,
    POPPY_READ,
    POPPY_WRITE,
    RESERVED_SCOPE_PREFIX,
    custom_scope_problem,
    format_scope,
    is_scope_token,
    parse_scope,
)
from frontdoor_protocol.strict_json import MalformedJSON, MalformedReason, loads, loads_object

__all__ = [
    "ASYMMETRIC_JWS_ALGORITHMS",
    "BUILT_IN_SCOPES",
    "CATALOGUE",
    "CLIENT_AUTH_METHOD",
    "METADATA_WELL_KNOWN",
    "OPERATIONS_EXTENSION",
    "POPPY_READ",
    "POPPY_WRITE",
    "PROFILES",
    "PROFILE_0_2",
    "REQUIRED_DPOP_ALGORITHM",
    "RESERVED_SCOPE_PREFIX",
    "ApiListing",
    "ApiType",
    "AssertionAudience",
    "Auth",
    "AuthorizationServerMetadata",
    "ChallengeScheme",
    "CompanyAgent",
    "ConversationProtocol",
    "DiscoveryDocument",
    "DiscoveryInputs",
    "ErrorCode",
    "ErrorEntry",
    "ExtensionDescriptor",
    "ExtensionNameKind",
    "Feedback",
    "Finding",
    "FindingCode",
    "Findings",
    "GrantType",
    "InvalidDiscoveryInputs",
    "MalformedJSON",
    "MalformedReason",
    "MediatedField",
    "MediatedSignIn",
    "Organization",
    "Profile",
    "ProtocolError",
    "SessionCredential",
    "Severity",
    "SignInOffer",
    "Surface",
    "UnsupportedProtocolVersion",
    "UrlProblem",
    "Web",
    "build_discovery_document",
    "build_metadata",
    "check_discovery_document",
    "check_https_url",
    "check_metadata",
    "custom_scope_problem",
    "discovery_url",
    "domains_equal",
    "extension_name_kind",
    "format_scope",
    "has_errors",
    "host_of",
    "https_url_problem",
    "is_asymmetric_algorithm",
    "is_domain_name",
    "is_scope_token",
    "loads",
    "loads_object",
    "metadata_url",
    "normalize_domain",
    "parse_protocol_version",
    "parse_scope",
    "profile_for",
]
