"""ASGI entry point for granian: `granian --interface asgi frontdoor_issuer.asgi:app`."""

import os

from frontdoor_core.dev_mode import warn_if_dev_mode
from frontdoor_httpkit import lean_route_observer

from .app import create_app
from .http.lean_routes import LeanRoutes
from .settings import load

_settings = load()
# Introspection's and the token endpoint's lean routes sit in front of Litestar (issue #13 §1-§2, ADR 0005 §6).
app = LeanRoutes(create_app(_settings), max_body_bytes=_settings.max_body_bytes, hsts=not _settings.is_dev,
                 trusted_proxies=_settings.trusted_proxies, observe=lean_route_observer("issuer"))
warn_if_dev_mode(_settings, "issuer", os.environ)  # after create_app: logging is configured
