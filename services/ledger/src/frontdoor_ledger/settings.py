"""The ledger's settings: the shared `Settings`, read once from the environment."""

from __future__ import annotations

import os

from frontdoor_core.settings import Settings, load_settings

__all__ = ["Settings", "load"]


def load() -> Settings:
    """Parse ``os.environ``; raises `SettingsError` naming the bad variable."""
    return load_settings(os.environ)
