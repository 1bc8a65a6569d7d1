"""Credentials of tenants and their admins.

Key encryption at rest, issuer signing keys and their rotation, admin passwords,
management API keys, and tenant slugs. Everything here is pure: no I/O, no database, time passed in by the caller. The
repositories that store what these functions produce live elsewhere.
"""

from frontdoor_tenancy.credentials.api_key import (
    API_KEY_PATTERN,
    IssuedApiKey,
    ParsedApiKey,
    api_key_hashes_equal,
    hash_api_key,
    new_api_key,
    parse_api_key,
    verify_api_key,
)
from frontdoor_tenancy.credentials.key_encryption import (
    DecryptionError,
    InvalidKekValue,
    Kek,
    Reencryption,
    generate_kek_value,
    kek_id,
    row_aad,
)
from frontdoor_tenancy.credentials.key_rotation import (
    DEFAULT_PUBLISH_LEAD,
    NoSigningKey,
    Rotation,
    SigningKeyRecord,
    current_signing_key,
    published_keys,
    removable_keys,
    rotate,
)
from frontdoor_tenancy.credentials.password import (
    DUMMY_PASSWORD_HASH,
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    check_password_strength,
    hash_password,
    needs_rehash,
    verify_password,
)
from frontdoor_tenancy.credentials.signing_key import (
    SIGNING_ALGORITHM,
    InvalidSigningKey,
    SigningKeyMaterial,
    generate_signing_key,
    load_private_key,
    public_jwk,
)
from frontdoor_tenancy.credentials.slug import (
    MAX_SLUG_LENGTH,
    MIN_SLUG_LENGTH,
    RESERVED_SLUGS,
    InvalidSlug,
    validate_slug,
)

__all__ = [
    "API_KEY_PATTERN",
    "DEFAULT_PUBLISH_LEAD",
    "DUMMY_PASSWORD_HASH",
    "MAX_PASSWORD_LENGTH",
    "MAX_SLUG_LENGTH",
    "MIN_PASSWORD_LENGTH",
    "MIN_SLUG_LENGTH",
    "RESERVED_SLUGS",
    "SIGNING_ALGORITHM",
    "DecryptionError",
    "InvalidKekValue",
    "InvalidSigningKey",
    "InvalidSlug",
    "IssuedApiKey",
    "Kek",
    "NoSigningKey",
    "ParsedApiKey",
    "Reencryption",
    "Rotation",
    "SigningKeyMaterial",
    "SigningKeyRecord",
    "api_key_hashes_equal",
    "check_password_strength",
    "current_signing_key",
    "generate_kek_value",
    "generate_signing_key",
    "hash_api_key",
    "hash_password",
    "kek_id",
    "load_private_key",
    "needs_rehash",
    "new_api_key",
    "parse_api_key",
    "public_jwk",
    "published_keys",
    "removable_keys",
    "rotate",
    "row_aad",
    "validate_slug",
    "verify_api_key",
    "verify_password",
]
