"""ASGI entry point for granian: `granian --interface asgi frontdoor_ledger.asgi:app`."""

import os

from frontdoor_core.dev_mode import warn_if_dev_mode
from frontdoor_httpkit import lean_route_observer

from .app import create_app
from .http.lean_routes import LeanRoutes
from .settings import load

_settings = load()
# The agent's confirm is served on a lean route in front of Litestar (issue #13 §4).
app = LeanRoutes(create_app(_settings), max_body_bytes=_settings.max_body_bytes, hsts=not _settings.is_dev,
                 observe=lean_route_observer("ledger"))
warn_if_dev_mode(_settings, "ledger", os.environ)  # after create_app: logging is configured
