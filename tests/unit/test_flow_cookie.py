"""The sign-in flow cookie's SameSite/Secure follow the issuer's scheme, not the environment alone.

The company's login page answers with a cross-site form POST to the issuer's callback: a
``SameSite=Lax`` cookie does not go with it, so an issuer served over HTTPS must set
``SameSite=None; Secure`` (a dev stack behind TLS names included); only a dev issuer on plain
HTTP, on the company's own site (``make run``'s 127.0.0.1), keeps ``Lax``.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from frontdoor_issuer.http.sign_in_pages import FLOW_COOKIE, flow_cookie


def _state(*, dev: bool, issuer: str) -> object:
    return SimpleNamespace(ctx=SimpleNamespace(settings=SimpleNamespace(is_dev=dev, issuer_base_url=issuer)))


@pytest.mark.parametrize(("dev", "issuer", "samesite", "secure"), [
    (False, "https://issuer.frontdoor.example", "none", True),
    (True, "https://auth.northwind.example", "none", True),  # dev behind TLS: issuer and company on two sites
    (True, "http://127.0.0.1:8001", "lax", False),  # make run: one site, plain HTTP
])
def test_the_flow_cookie_crosses_sites_whenever_the_issuer_is_https(dev: bool, issuer: str, samesite: str,
                                                                   secure: bool) -> None:
    cookie = flow_cookie(_state(dev=dev, issuer=issuer), "northwind", "flow-id")  # type: ignore[arg-type]
    assert cookie.key == FLOW_COOKIE
    assert (cookie.samesite, cookie.secure, cookie.httponly, cookie.path) == (samesite, secure, True, "/northwind/")
