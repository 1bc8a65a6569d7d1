"""ASGI entry point for granian: `granian --interface asgi frontdoor_ledger.asgi:app`."""

from .app import create_app
from .settings import load

app = create_app(load())
