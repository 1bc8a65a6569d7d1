"""Domains proven by DNS: naming, challenge tokens, TXT lookups, the claim lifecycle.

A tenant claims a domain (:func:`normalize_domain`), publishes
``challenge_value(token)`` as a TXT record at :func:`challenge_name`, and each
check turns a :class:`TxtLookup` answer into an :class:`Observation`
(:func:`match_challenge`) that :func:`evaluate_check` applies to the claim.
"""

from frontdoor_tenancy.domains.challenge_token import (
    CHALLENGE_VALUE_PREFIX,
    challenge_value,
    new_challenge_token,
)
from frontdoor_tenancy.domains.domain_name import (
    CHALLENGE_LABEL,
    MAX_DOMAIN_LENGTH,
    InvalidDomain,
    InvalidDomainCode,
    challenge_name,
    normalize_domain,
)
from frontdoor_tenancy.domains.lifecycle import (
    ClaimFacts,
    Decision,
    DomainEvent,
    DomainStatus,
    LifecyclePolicy,
    evaluate_check,
    is_listed,
)
from frontdoor_tenancy.domains.observation import Observation, match_challenge
from frontdoor_tenancy.domains.public_suffix import is_public_suffix
from frontdoor_tenancy.domains.txt_lookup import (
    Absent,
    Found,
    Indeterminate,
    TxtLookup,
    TxtLookupResult,
)
from frontdoor_tenancy.domains.txt_resolver import TxtResolver

__all__ = [
    "CHALLENGE_LABEL",
    "CHALLENGE_VALUE_PREFIX",
    "MAX_DOMAIN_LENGTH",
    "Absent",
    "ClaimFacts",
    "Decision",
    "DomainEvent",
    "DomainStatus",
    "Found",
    "Indeterminate",
    "InvalidDomain",
    "InvalidDomainCode",
    "LifecyclePolicy",
    "Observation",
    "TxtLookup",
    "TxtLookupResult",
    "TxtResolver",
    "challenge_name",
    "challenge_value",
    "evaluate_check",
    "is_listed",
    "is_public_suffix",
    "match_challenge",
    "new_challenge_token",
    "normalize_domain",
]
