"""What one DNS check says about a claim's challenge record."""

from enum import StrEnum

from frontdoor_tenancy.domains.txt_lookup import Absent, Found, Indeterminate, TxtLookupResult


class Observation(StrEnum):
    """The evidence one check produced.

    Attributes:
        PRESENT: A TXT record at the challenge name carries the expected value.
        ABSENT: DNS answered definitively and no record carries it (no name,
            no TXT records, or only other values).
        UNKNOWN: DNS did not answer usably; nothing may be concluded.
    """

    PRESENT = "present"
    ABSENT = "absent"
    UNKNOWN = "unknown"


def match_challenge(result: TxtLookupResult, expected_value: str) -> Observation:
    """Decide whether a lookup shows the expected challenge value.

    Any one record equal to ``expected_value`` is enough, so a domain may carry
    other TXT records (or several tenants' challenges) at the same name. The
    comparison is exact and case-sensitive after stripping surrounding
    whitespace from both sides, which DNS panels sometimes add.

    Args:
        result: The lookup's outcome.
        expected_value: The full value, ``frontdoor-verify=<token>``.

    Returns:
        The observation for the lifecycle.

    Raises:
        ValueError: If ``expected_value`` is blank, which would match a blank
            record.
    """
    expected = expected_value.strip()
    if not expected:
        raise ValueError("expected_value must not be blank")
    match result:
        case Found(values=values):
            if any(value.strip() == expected for value in values):
                return Observation.PRESENT
            return Observation.ABSENT
        case Absent():
            return Observation.ABSENT
        case Indeterminate():
            return Observation.UNKNOWN
