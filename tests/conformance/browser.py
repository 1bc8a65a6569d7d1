"""A person in a browser, for the harness: follows redirects, keeps cookies, fills forms.

It acts only through the pages a real user sees (Frontdoor's device and consent pages, the
company's login page), parsing their HTML forms: no private API, no shortcut.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser
from urllib.parse import urlencode, urljoin

import httpx


@dataclass
class Form:
    action: str
    method: str
    fields: dict[str, list[str]] = field(default_factory=dict)
    buttons: dict[str, str] = field(default_factory=dict)


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[Form] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(Form(action=a.get("action", ""), method=a.get("method", "get").lower()))
        elif self.forms and tag == "input":
            kind = a.get("type", "text")
            if kind == "checkbox" and "checked" not in a:
                return
            if kind == "submit":
                self.forms[-1].buttons[a.get("name", "")] = a.get("value", "")
                return
            self.forms[-1].fields.setdefault(a.get("name", ""), []).append(a.get("value", ""))
        elif self.forms and tag == "button" and a.get("name"):
            self.forms[-1].buttons.setdefault(a["name"], a.get("value", ""))


def forms(html: str) -> list[Form]:
    parser = _Forms()
    parser.feed(html)
    return parser.forms


class Browser:
    """One person's browser on the in-process network."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.http = client

    async def _follow(self, response: httpx.Response) -> httpx.Response:
        for _ in range(10):
            if response.status_code not in (301, 302, 303, 307, 308):
                return response
            target = urljoin(str(response.url), response.headers["location"])
            response = await self.http.get(target)
        raise AssertionError("too many redirects")

    async def open(self, url: str) -> httpx.Response:
        return await self._follow(await self.http.get(url))

    async def submit(self, page: httpx.Response, values: dict[str, str | list[str]] | None = None,
                     button: tuple[str, str] | None = None, index: int = 0) -> httpx.Response:
        found = forms(page.text)
        if not found:
            raise AssertionError(f"no form on {page.url} ({page.status_code}): {page.text[:300]}")
        form = found[index]
        data: list[tuple[str, str]] = []
        merged: dict[str, list[str]] = {k: list(v) for k, v in form.fields.items() if k}
        for k, v in (values or {}).items():
            merged[k] = v if isinstance(v, list) else [v]
        for k, vs in merged.items():
            data.extend((k, x) for x in vs)
        if button is not None:
            data.append(button)
        target = urljoin(str(page.url), form.action or str(page.url))
        if form.method == "post":
            response = await self.http.post(target, content=urlencode(data).encode(),
                                            headers={"Content-Type": "application/x-www-form-urlencoded"})
        else:
            response = await self.http.get(target, params=data)
        return await self._follow(response)
