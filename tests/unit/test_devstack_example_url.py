"""``make run``: Northwind's public origin (``FRONTDOOR_EXAMPLE_PUBLIC_URL``), its port's loopback URL unless set."""

from __future__ import annotations

import pytest
from frontdoor_core.settings import load_settings
from frontdoor_devstack.run import example_public_url


def test_unset_it_follows_the_example_port() -> None:
    environ = {"FRONTDOOR_ENV": "dev", "FRONTDOOR_EXAMPLE_PORT": "9103"}
    assert example_public_url(environ, load_settings(environ)) == "http://127.0.0.1:9103"
    assert example_public_url({"FRONTDOOR_EXAMPLE_PUBLIC_URL": " "}, load_settings({})) == "http://127.0.0.1:8003"


@pytest.mark.parametrize("value", ["https://northwind.example", "https://northwind.example/", "https://nw.test:8443"])
def test_an_origin_a_proxy_serves_is_kept(value: str) -> None:
    environ = {"FRONTDOOR_EXAMPLE_PUBLIC_URL": value, "FRONTDOOR_EXAMPLE_PORT": "9103"}
    assert example_public_url(environ, load_settings(environ)) == value.rstrip("/")


@pytest.mark.parametrize("value", ["northwind.example", "ftp://northwind.example", "https://northwind.example/shop",
                                   "https://northwind.example/?a=1", "https://u:p@northwind.example", "https://"])
def test_anything_but_an_origin_is_a_configuration_error(value: str) -> None:
    with pytest.raises(ValueError, match="FRONTDOOR_EXAMPLE_PUBLIC_URL must be an origin"):
        example_public_url({"FRONTDOOR_EXAMPLE_PUBLIC_URL": value}, load_settings({}))
