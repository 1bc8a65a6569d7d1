"""What a test puts on a real stack's ``PYTHONPATH`` in place of DNS and the web PKI (`tests.support.tls_front`).

Frontdoor's own fetches (agent metadata and JWKS, the login's JWKS, publish checks) and its
webhook deliveries resolve host names once, in ``frontdoor_core.outbound.SystemResolver``, and
verify TLS against certifi's bundle. A test stack's agents and companies live on loopback at
names like ``atlas.example``: with ``STACK_SITE_HOSTS`` (``name=ip,...``) set, those names
resolve to their loopback addresses here, as an ``/etc/hosts`` entry would make them; with
``STACK_SITE_CA_BUNDLE`` set, certifi's bundle is that file (certifi's roots plus the test's
throwaway CA), as a private deployment's trust store would be. Every check on the answer
(the outbound allowlist, TLS host names) still runs. Inert when neither is set.
"""

from __future__ import annotations

import os

_HOSTS = {
    name.strip().lower(): ip.strip()
    for name, _, ip in (item.partition("=") for item in os.environ.get("STACK_SITE_HOSTS", "").split(","))
    if name.strip() and ip.strip()
}
_BUNDLE = os.environ.get("STACK_SITE_CA_BUNDLE", "")

if _BUNDLE:
    import certifi

    certifi.where = lambda: _BUNDLE

if _HOSTS:
    from frontdoor_core.outbound import resolver as _resolver

    _system_resolve = _resolver.SystemResolver.resolve

    async def _resolve(self: _resolver.SystemResolver, host: str, port: int) -> list[str]:
        ip = _HOSTS.get(host.lower().rstrip("."))
        return [ip] if ip is not None else await _system_resolve(self, host, port)

    _resolver.SystemResolver.resolve = _resolve  # type: ignore[method-assign]
