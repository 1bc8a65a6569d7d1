"""Public suffixes, from the Public Suffix List bundled with ``publicsuffixlist``.

A tenant may claim a registrable domain or anything below one, never a public
suffix itself: proving control of ``github.io`` or ``co.uk`` would let one tenant
speak for every site beneath it. Both sections of the list count: the ICANN
section (``com``, ``co.uk``) and the private section (``github.io``,
``blogspot.com``), because a private-section suffix is exactly a name under which
unrelated parties each get their own subdomain.

The list is the copy bundled with the pinned package, so results change only
when the dependency is upgraded, never at run time.
"""

from functools import cache

from publicsuffixlist import PublicSuffixList


@cache
def _suffix_list() -> PublicSuffixList:
    # Parsed once, on first use, so importing the package stays cheap. The
    # instance is thread-safe once constructed. accept_unknown=True applies the
    # list's implicit "*" rule: an unlisted TLD is itself a public suffix.
    return PublicSuffixList(only_icann=False, accept_unknown=True)


def is_public_suffix(domain: str) -> bool:
    """Tell whether a normalised domain is exactly a public suffix.

    Args:
        domain: A lowercase A-label domain without a trailing dot.

    Returns:
        True when the whole name is a public suffix in the ICANN or the private
        section (wildcard rules included, exceptions honoured); False when it is
        a registrable domain or a name below one.
    """
    return bool(_suffix_list().is_public(domain))
