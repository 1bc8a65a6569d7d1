"""Northwind: an example company protecting its API, MCP server and company agent with Frontdoor's sdk.

Start with :mod:`northwind.app`; :mod:`northwind.asgi` is the entry point for a server.
"""

from northwind.app import create_app
from northwind.config import NorthwindConfig
from northwind.perform import Performer, performer_of

__all__ = ["NorthwindConfig", "Performer", "create_app", "performer_of"]
