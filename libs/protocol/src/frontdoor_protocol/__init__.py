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
from frontdoor_protocol.base64url import b64url_decode, b64url_encode
from frontdoor_protocol.client_assertion import ClientAssertion, verify_client_assertion
from frontdoor_protocol.compact_jws import CompactJWS, MalformedJWS, parse_compact_jws
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
from frontdoor_protocol.dpop_proof import DEFAULT_DPOP_IAT_WINDOW, DPoPProof, access_token_hash, verify_dpop_proof
from frontdoor_protocol.errors import CATALOGUE, ChallengeScheme, ErrorCode, ErrorEntry, ProtocolError, Surface
from frontdoor_protocol.extension_name import OPERATIONS_EXTENSION, ExtensionNameKind, extension_name_kind
from frontdoor_protocol.finding import Finding, FindingCode, Findings, Severity, has_errors
from frontdoor_protocol.http_target_uri import htu_normalize
from frontdoor_protocol.https_url import UrlProblem, check_https_url, host_of, https_url_problem
from frontdoor_protocol.jwk_thumbprint import jwk_thumbprint
from frontdoor_protocol.jws_algorithm import ASYMMETRIC_JWS_ALGORITHMS, REQUIRED_DPOP_ALGORITHM, is_asymmetric_algorithm
from frontdoor_protocol.jws_verification import UnknownKeyId
from frontdoor_protocol.jwt_assertion import DEFAULT_CLOCK_SKEW, MAX_ASSERTION_LIFETIME
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
from frontdoor_protocol.session_assertion import SessionAssertion, is_user_id, verify_session_assertion
from frontdoor_protocol.session_token import (
    MAX_SESSION_TOKEN_LIFETIME,
    SESSION_TOKEN_TYPE,
    Confirmation,
    SessionTokenClaims,
    mint_session_token,
    verify_session_token,
)
from frontdoor_protocol.strict_json import MalformedJSON, MalformedReason, loads, loads_object
from frontdoor_protocol.verified_signatures import VerifiedSignatures

__all__ = [
    "ASYMMETRIC_JWS_ALGORITHMS",
    "BUILT_IN_SCOPES",
    "CATALOGUE",
    "CLIENT_AUTH_METHOD",
    "DEFAULT_CLOCK_SKEW",
    "DEFAULT_DPOP_IAT_WINDOW",
    "MAX_ASSERTION_LIFETIME",
    "MAX_SESSION_TOKEN_LIFETIME",
    "METADATA_WELL_KNOWN",
    "OPERATIONS_EXTENSION",
    "POPPY_READ",
    "POPPY_WRITE",
    "PROFILES",
    "PROFILE_0_2",
    "REQUIRED_DPOP_ALGORITHM",
    "RESERVED_SCOPE_PREFIX",
    "SESSION_TOKEN_TYPE",
    "ApiListing",
    "ApiType",
    "AssertionAudience",
    "Auth",
    "AuthorizationServerMetadata",
    "ChallengeScheme",
    "ClientAssertion",
    "CompactJWS",
    "CompanyAgent",
    "Confirmation",
    "ConversationProtocol",
    "DPoPProof",
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
    "MalformedJWS",
    "MalformedReason",
    "MediatedField",
    "MediatedSignIn",
    "Organization",
    "Profile",
    "ProtocolError",
    "SessionAssertion",
    "SessionCredential",
    "SessionTokenClaims",
    "Severity",
    "SignInOffer",
    "Surface",
    "UnknownKeyId",
    "UnsupportedProtocolVersion",
    "UrlProblem",
    "Web",
    "access_token_hash",
    "b64url_decode",
    "b64url_encode",
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
    "htu_normalize",
    "is_asymmetric_algorithm",
    "is_domain_name",
    "is_scope_token",
    "is_user_id",
    "jwk_thumbprint",
    "loads",
    "loads_object",
    "metadata_url",
    "mint_session_token",
    "normalize_domain",
    "parse_compact_jws",
    "parse_protocol_version",
    "parse_scope",
    "profile_for",
    "verify_client_assertion",
    "verify_dpop_proof",
    "verify_session_assertion",
    "verify_session_token",
]

# PAP 1.0 (ADR 0004): delegated Session JWTs, RFC 9068 access tokens, paired discovery.
from frontdoor_protocol.access_token import (
    ACCESS_TOKEN_LIFETIME,
    TOKEN_USE_ACCESS,
    AccessTokenClaims,
    mint_access_token,
    verify_access_token,
)
from frontdoor_protocol.bounded_cache import BoundedLRU
from frontdoor_protocol.delegated_request import (
    DelegatedCaller,
    DelegatedRequest,
    parse_delegated_request,
    verify_delegated_request,
)
from frontdoor_protocol.delegated_session import (
    DEFAULT_SESSION_MAX_AGE,
    MAX_SESSION_HEADER_LENGTH,
    POPPY_SESSION_HEADER,
    SESSION_JWT_TYPE,
    DelegatedSession,
    SessionHeader,
    is_session_id,
    mint_poppy_session,
    parse_poppy_session,
    poppy_session_value,
    verify_poppy_session,
)
from frontdoor_protocol.delegation import (
    DEFAULT_DELEGATION_CACHE_SIZE,
    DELEGATION_TYPE,
    MAX_DELEGATION_LIFETIME,
    DelegationCache,
    UnknownAgentKeyId,
    VerifiedDelegation,
    mint_delegation,
)
from frontdoor_protocol.discovery_cross_check import check_discovery_documents
from frontdoor_protocol.profile import PROFILE_1_0
from frontdoor_protocol.protected_resource_metadata import (
    PROTECTED_RESOURCE_WELL_KNOWN,
    build_protected_resource_metadata,
    domain_resource,
    protected_resource_metadata_url,
)
from frontdoor_protocol.resource_request import (
    HeaderMultiMap,
    MissingToken,
    RequestHeaders,
    VerifiedCaller,
    authorization_credential,
    header_values,
    verify_resource_request,
)
from frontdoor_protocol.standard_webhooks import (
    DEFAULT_WEBHOOK_TOLERANCE,
    PUBLIC_KEY_PREFIX,
    SECRET_PREFIX,
    SIGNING_KEY_PREFIX,
    WEBHOOK_ID_HEADER,
    WEBHOOK_SIGNATURE_HEADER,
    WEBHOOK_TIMESTAMP_HEADER,
    WebhookKeys,
    WebhookRefusal,
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

__all__ += [
    "HeaderMultiMap",
    "MissingToken",
    "RequestHeaders",
    "VerifiedCaller",
    "VerifiedSignatures",
    "authorization_credential",
    "header_values",
    "verify_resource_request",
]

__all__ += [
    "ACCESS_TOKEN_LIFETIME",
    "DEFAULT_SESSION_MAX_AGE",
    "DELEGATION_TYPE",
    "MAX_DELEGATION_LIFETIME",
    "MAX_SESSION_HEADER_LENGTH",
    "POPPY_SESSION_HEADER",
    "PROFILE_1_0",
    "PROTECTED_RESOURCE_WELL_KNOWN",
    "SESSION_JWT_TYPE",
    "TOKEN_USE_ACCESS",
    "AccessTokenClaims",
    "DelegatedCaller",
    "DelegatedRequest",
    "DelegatedSession",
    "SessionHeader",
    "UnknownAgentKeyId",
    "VerifiedDelegation",
    "BoundedLRU",
    "DEFAULT_DELEGATION_CACHE_SIZE",
    "DelegationCache",
    "build_protected_resource_metadata",
    "check_discovery_documents",
    "domain_resource",
    "is_session_id",
    "mint_access_token",
    "mint_delegation",
    "mint_poppy_session",
    "parse_delegated_request",
    "parse_poppy_session",
    "poppy_session_value",
    "protected_resource_metadata_url",
    "verify_access_token",
    "verify_delegated_request",
    "verify_poppy_session",
]

# Standard Webhooks signatures: the dispatcher signs and the sdk verifies with this one module.
__all__ += [
    "DEFAULT_WEBHOOK_TOLERANCE",
    "PUBLIC_KEY_PREFIX",
    "SECRET_PREFIX",
    "SIGNING_KEY_PREFIX",
    "WEBHOOK_ID_HEADER",
    "WEBHOOK_SIGNATURE_HEADER",
    "WEBHOOK_TIMESTAMP_HEADER",
    "WebhookKeys",
    "WebhookRefusal",
    "WebhookSignatureError",
    "format_public_key",
    "format_secret",
    "format_signing_key",
    "parse_public_key",
    "parse_secret",
    "parse_signature_header",
    "parse_signing_key",
    "sign_v1",
    "sign_v1a",
    "signature_header",
    "signed_content",
    "verify_webhook_signature",
]

# One declarative JWT profile and its verifier: the signed message types are profiles of it.
from frontdoor_protocol.jwt_binding import access_token_binding, key_binding, request_binding  # noqa: E402
from frontdoor_protocol.jwt_profile import (  # noqa: E402
    AudienceRule,
    ClaimBinding,
    ClaimRule,
    JWTProfile,
    JWTRefusal,
    JWTRefusalKind,
    KeySource,
    ProfiledJWT,
    reason_table,
    verify_profiled_jwt,
)

__all__ += [
    "AudienceRule",
    "ClaimBinding",
    "ClaimRule",
    "JWTProfile",
    "JWTRefusal",
    "JWTRefusalKind",
    "KeySource",
    "ProfiledJWT",
    "access_token_binding",
    "key_binding",
    "reason_table",
    "request_binding",
    "verify_profiled_jwt",
]
