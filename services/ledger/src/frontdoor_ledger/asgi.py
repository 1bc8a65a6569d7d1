"""ASGI entry point for granian: `granian --interface asgi frontdoor_ledger.asgi:app`."""

import os

from frontdoor_core.dev_mode import warn_if_dev_mode

from .app import create_app
from .settings import load

_settings = load()
app = create_app(_settings)
warn_if_dev_mode(_settings, "ledger", os.environ)  # after create_app: logging is configured
