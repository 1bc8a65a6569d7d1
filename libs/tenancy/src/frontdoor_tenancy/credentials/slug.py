"""Tenant slugs: the path segment that names a tenant's issuer.

A tenant's issuer is ``{FRONTDOOR_ISSUER_BASE_URL}/{slug}`` and its RFC 8414 metadata
also lives at ``/.well-known/oauth-authorization-server/{slug}``, so a slug must be a
safe, unambiguous URL path segment and must not collide with a route of the services
(``healthz``, ``jwks``, ``api``...) or impersonate the operator (``frontdoor``,
``support``...). Slugs are not normalised: ``Acme`` is refused rather than silently
becoming ``acme``, so the issuer a company sees is exactly the one it typed.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "MAX_SLUG_LENGTH",
    "MIN_SLUG_LENGTH",
    "RESERVED_SLUGS",
    "InvalidSlug",
    "validate_slug",
]

MIN_SLUG_LENGTH: Final = 3
MAX_SLUG_LENGTH: Final = 40

# Groups, one per paragraph: service routes and well-known paths; operator, product
# and support names; hostnames and environments; values that leak out of bugs. A word
# list reads and reviews better than 140 one-per-line string literals.
RESERVED_SLUGS: Final = frozenset(
    """
    api apis well-known wellknown oauth oauth2 oidc openid authorize
    authorization token tokens revoke introspect device register registration
    userinfo jwks jwks-json keys certs login logout signin signout signup sign-in
    sign-out sign-up session sessions callback healthz readyz livez health metrics
    openapi swagger redoc static assets public media uploads files cdn favicon
    robots sitemap poppy poppy-json ledger dispatcher webhook webhooks events
    callbacks

    frontdoor front-door admin administrator root system sysadmin superuser operator
    staff internal console dashboard portal account accounts billing settings
    profile docs doc documentation status support help contact security abuse legal
    privacy terms about blog news auth issuer issuers tenant tenants org orgs
    organization organizations team teams user users

    www mail email smtp imap pop ftp dns ns1 ns2 localhost local dev test testing
    staging stage prod production

    null nil none undefined nan true false default new edit delete self all any
    unknown
    """.split()  # noqa: SIM905
)
"""Slugs no tenant may take."""

_RESERVED_PREFIXES: Final = ("frontdoor-", "poppy-")
_CHARSET = re.compile(r"[a-z0-9-]+")


class InvalidSlug(ValueError):
    """A slug was refused.

    Attributes:
        code: Stable code: ``too_short``, ``too_long``, ``invalid_characters``,
            ``hyphen_at_edge``, ``consecutive_hyphens`` or ``reserved``.
        message: A sentence to show the person who chose the slug.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def validate_slug(slug: str) -> str:
    """Check a proposed tenant slug.

    Args:
        slug: The slug as submitted.

    Returns:
        The slug, unchanged.

    Raises:
        InvalidSlug: The first rule the slug breaks, in the order of the codes.
    """
    if len(slug) < MIN_SLUG_LENGTH:
        raise InvalidSlug("too_short", f"A slug has at least {MIN_SLUG_LENGTH} characters.")
    if len(slug) > MAX_SLUG_LENGTH:
        raise InvalidSlug("too_long", f"A slug has at most {MAX_SLUG_LENGTH} characters.")
    if not _CHARSET.fullmatch(slug):
        raise InvalidSlug(
            "invalid_characters",
            "A slug uses only lowercase letters a-z, digits 0-9 and hyphens.",
        )
    if slug.startswith("-") or slug.endswith("-"):
        raise InvalidSlug("hyphen_at_edge", "A slug cannot start or end with a hyphen.")
    if "--" in slug:
        raise InvalidSlug("consecutive_hyphens", "A slug cannot contain two hyphens in a row.")
    if slug in RESERVED_SLUGS or slug.startswith(_RESERVED_PREFIXES):
        raise InvalidSlug("reserved", "This slug is reserved; please choose another.")
    return slug
