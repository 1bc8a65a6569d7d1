"""IDs for sign-in records (``sgn_``, ``atk_``, ``sia_``) in the shape of `frontdoor_core.ids`.

`frontdoor_core.ids.new_id` accepts a closed set of prefixes that does not list these
yet; until it does, the sortable time-plus-random body is borrowed from an accepted
prefix and given ours. Not secrets: Account Token *values* come from `secrets`.
"""

from __future__ import annotations

from frontdoor_core.ids import new_id

__all__ = ["new_record_id"]

_PREFIXES = frozenset({"sgn", "atk", "sia"})


def new_record_id(prefix: str) -> str:
    """A new sortable ID such as ``sgn_01JD...``."""
    if prefix not in _PREFIXES:
        raise ValueError(f"unknown record prefix {prefix!r}")
    return prefix + new_id("evt")[3:]
