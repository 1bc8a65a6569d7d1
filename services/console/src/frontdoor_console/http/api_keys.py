"""``/api/v1/api-keys``: create (shown once), list (prefix only), revoke."""

from __future__ import annotations

from typing import Literal

import msgspec
from frontdoor_core.db import transaction
from frontdoor_tenancy import api_keys
from frontdoor_tenancy.actor import Actor
from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody

from ..access import opt
from .deps import ctx_of, require_writer
from .pagination import CURSOR, LIMIT, decode_cursor, page
from .problems import PROBLEMS

__all__ = ["ApiKeysController"]


class NewApiKey(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    name: str
    role: Literal["owner", "admin", "viewer"] = "admin"


class ApiKeyList(msgspec.Struct, frozen=True, kw_only=True):
    data: list[api_keys.ApiKeyView]
    next_cursor: str | None = None


class CreatedOut(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    name: str
    prefix: str
    role: str
    api_key: str


class ApiKeysController(Controller):
    path = "/api/v1/api-keys"
    tags = ["api-keys"]  # noqa: RUF012 - Litestar reads it as a plain class attribute

    @post("/", responses=PROBLEMS, status_code=201, summary="Create an API key (the secret is shown once)",
          opt=opt("manage_api_keys"),
          description="Owners only. `role` (default `admin`) is what the key may do, at most the caller's role.")
    async def create(self, data: JSONBody[NewApiKey], actor: NamedDependency[Actor], state: State) -> CreatedOut:
        require_writer(actor)
        async with transaction(ctx_of(state).pool) as conn:
            created = await api_keys.create_key(conn, actor, data.name, role=data.role)
        return CreatedOut(id=created.key.id, name=created.key.name, prefix=created.key.prefix,
                          role=created.key.role, api_key=created.api_key)

    @get("/", responses=PROBLEMS, summary="List API keys (prefixes only), newest first")
    async def list_(self, actor: NamedDependency[Actor], state: State, limit: int = LIMIT,
                    cursor: str | None = CURSOR) -> ApiKeyList:
        key = decode_cursor(cursor)
        async with ctx_of(state).pool.acquire() as conn:
            rows = await api_keys.list_keys(conn, actor.tenant_id, before=key[0] if key else None, limit=limit + 1)
        data, next_cursor = page(rows, limit, lambda k: (k.id,))
        return ApiKeyList(data=data, next_cursor=next_cursor)

    @delete("/{key_id:str}", responses=PROBLEMS, status_code=200, summary="Revoke an API key (owners only)",
            opt=opt("manage_api_keys"))
    async def revoke(self, key_id: FromPath[str], actor: NamedDependency[Actor], state: State) -> api_keys.ApiKeyView:
        require_writer(actor)
        async with transaction(ctx_of(state).pool) as conn:
            return await api_keys.revoke_key(conn, actor, key_id)
