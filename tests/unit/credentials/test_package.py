"""The credentials package's public surface."""

from __future__ import annotations

import types

import frontdoor_tenancy.credentials as credentials


def test_every_exported_name_exists_and_is_not_a_module() -> None:
    for name in credentials.__all__:
        value = getattr(credentials, name)
        assert not isinstance(value, types.ModuleType), name


def test_exports_are_unique() -> None:
    assert len(set(credentials.__all__)) == len(credentials.__all__)
