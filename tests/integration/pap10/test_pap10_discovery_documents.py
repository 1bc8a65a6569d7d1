"""The three discovery documents as a 1.0 agent reads them [S §2]: the company's
``poppy.json``, its domain's RFC 9728 protected-resource metadata, and the issuer's RFC 8414
metadata, each pointing at the others exactly. The documents are the ones Frontdoor
generates (console API) and serves (issuer); the agent checks them with its own code.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.pap10.conftest import Shop1, agent_http, publish_company
from tests.support.dns_server import LocalDNS
from tests.support.mock_web import MockWeb
from tests.support.pap10_agent import DiscoveryError, discover


@pytest.mark.parametrize("published", ["1.0", "0.2"])
async def test_frontdoors_three_documents_point_at_each_other(shop: Shop1, web: MockWeb, dns: LocalDNS,
                                                              published: str) -> None:
    # [S §2]: resource = https://{domain}; one authorization server = the issuer; the issuer's
    # metadata has that exact issuer, protected_resources with the domain, refresh_token,
    # token and revocation endpoints. Serving 1.0 publishes them whichever version poppy.json names
    # (ADR 0004 §1); a poppy.json naming 0.2 is not used by an agent speaking only 1.0 [S §1].
    domain = await publish_company(shop, web, dns, published=published)
    async with agent_http(shop, web) as http:
        if published != "1.0":
            with pytest.raises(DiscoveryError) as refused:
                await discover(http, f"https://{domain}")
            assert refused.value.code == "unsupported_version"
        found = await discover(http, f"https://{domain}", versions=("1.0", published))
    assert found.issuer == shop.tenant.issuer == found.company_id
    assert found.poppy["protocol_version"] == published
    assert found.resource_metadata["authorization_servers"] == [shop.tenant.issuer]
    assert f"https://{domain}" in found.issuer_metadata["protected_resources"]
    assert found.issuer_metadata.get("device_authorization_endpoint")


@pytest.mark.parametrize(("case", "code"), [
    ("resource of another origin", "resource_mismatch"),
    ("another issuer protects it", "auth_issuer_mismatch"),
    ("two issuers, poppy.json names neither", "auth_issuer_not_listed"),
    ("poppy.json of another domain", "organization_domain_mismatch"),
    ("no protected-resource metadata", "resource_metadata_unavailable"),
])
async def test_documents_that_disagree_stop_the_agent(shop: Shop1, web: MockWeb, dns: LocalDNS, case: str,
                                                      code: str) -> None:
    # [S §2] "Stop; never infer domain fallback or silently change known Company identity."
    domain = await publish_company(shop, web, dns)
    origin = f"https://{domain}"
    prm_url = f"{origin}/.well-known/oauth-protected-resource"
    poppy_url = f"{origin}/.well-known/poppy.json"
    async with agent_http(shop, web) as http:
        prm: dict[str, Any] = (await http.get(prm_url)).json()
        poppy: dict[str, Any] = (await http.get(poppy_url)).json()
        if case == "resource of another origin":
            web.serve(prm_url, json={**prm, "resource": f"https://www.{domain}"})
        elif case == "another issuer protects it":
            web.serve(prm_url, json={**prm, "authorization_servers": [shop.tenant.issuer + "-other"]})
        elif case == "two issuers, poppy.json names neither":
            web.serve(prm_url, json={**prm, "authorization_servers": ["https://a.example", "https://b.example"]})
        elif case == "poppy.json of another domain":
            web.serve(poppy_url, json={**poppy, "organization": {**poppy["organization"], "domain": f"www.{domain}"}})
        else:
            web.routes.pop((domain, "/.well-known/oauth-protected-resource"))
        with pytest.raises(DiscoveryError) as refused:
            await discover(http, origin)
    assert refused.value.code == code


async def test_an_issuer_that_does_not_list_the_domain_stops_the_agent(shop: Shop1, web: MockWeb,
                                                                       dns: LocalDNS) -> None:
    # [S §2] protected_resources must contain the domain: a domain the issuer does not vouch for
    # (here: documents copied to an unverified domain) is refused.
    domain = await publish_company(shop, web, dns)
    copy = f"copy-{domain}"
    async with agent_http(shop, web) as http:
        for path in ("/.well-known/poppy.json", "/.well-known/oauth-protected-resource"):
            doc = (await http.get(f"https://{domain}{path}")).json()
            if "resource" in doc:
                doc["resource"] = f"https://{copy}"
            if "organization" in doc:
                doc["organization"] = {**doc["organization"], "domain": copy}
            web.serve(f"https://{copy}{path}", json=doc)
        with pytest.raises(DiscoveryError) as refused:
            await discover(http, f"https://{copy}")
    assert refused.value.code == "domain_not_protected"
