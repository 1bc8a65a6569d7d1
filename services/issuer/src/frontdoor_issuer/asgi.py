"""ASGI entry point for granian: `granian --interface asgi frontdoor_issuer.asgi:app`."""

import os

from frontdoor_core.dev_mode import warn_if_dev_mode

from .app import create_app
from .http.introspect_route import IntrospectionRoute
from .settings import load

_settings = load()
# Introspection's lean route sits in front of Litestar (issue #13 §1, ADR 0005 §6).
app = IntrospectionRoute(create_app(_settings), max_body_bytes=_settings.max_body_bytes, hsts=not _settings.is_dev)
warn_if_dev_mode(_settings, "issuer", os.environ)  # after create_app: logging is configured
