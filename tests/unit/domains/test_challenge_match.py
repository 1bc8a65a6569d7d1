"""match_challenge: lookup results to observations."""

import pytest
from frontdoor_tenancy.domains import Absent, Found, Indeterminate, Observation, TxtLookupResult, match_challenge

EXPECTED = "frontdoor-verify=abcdefghijklmnopqrstuvwxyz234567"


@pytest.mark.parametrize(
    ("result", "observation"),
    [
        (Found((EXPECTED,)), Observation.PRESENT),
        (Found(("v=spf1 -all", EXPECTED, "google-site-verification=x")), Observation.PRESENT),
        (Found((f"  {EXPECTED}\t",)), Observation.PRESENT),
        (Found(("frontdoor-verify=someone-elses-token", EXPECTED)), Observation.PRESENT),
        (Found(()), Observation.ABSENT),
        (Found(("v=spf1 -all",)), Observation.ABSENT),
        (Found((EXPECTED.upper(),)), Observation.ABSENT),  # exact, case-sensitive
        (Found((EXPECTED[:-1],)), Observation.ABSENT),
        (Found((EXPECTED + "x",)), Observation.ABSENT),
        (Found((f"prefix {EXPECTED}",)), Observation.ABSENT),
        (Found(("frontdoor-verify=", EXPECTED.removeprefix("frontdoor-verify="))), Observation.ABSENT),
        (Absent("nxdomain"), Observation.ABSENT),
        (Absent("no_answer"), Observation.ABSENT),
        (Indeterminate("timeout"), Observation.UNKNOWN),
        (Indeterminate("servfail"), Observation.UNKNOWN),
        (Indeterminate("refused"), Observation.UNKNOWN),
        (Indeterminate("error"), Observation.UNKNOWN),
    ],
)
def test_match_challenge(result: TxtLookupResult, observation: Observation) -> None:
    assert match_challenge(result, EXPECTED) is observation


def test_expected_value_is_stripped_too() -> None:
    assert match_challenge(Found((EXPECTED,)), f" {EXPECTED} ") is Observation.PRESENT


@pytest.mark.parametrize("expected", ["", "   "])
def test_blank_expected_value_is_refused(expected: str) -> None:
    with pytest.raises(ValueError, match="blank"):
        match_challenge(Found(("",)), expected)
