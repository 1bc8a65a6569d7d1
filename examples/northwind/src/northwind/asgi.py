"""The ASGI entry point: ``granian --interface asgi northwind.asgi:app``.

Configured from the environment:

- ``NORTHWIND_ISSUER``: your Frontdoor issuer (``auth.issuer``).
- ``NORTHWIND_CREDENTIAL``: your resource-server credential (``fdrs_...``); a secret.
- ``NORTHWIND_PUBLIC_URL``: the origin agents call, e.g. ``https://northwind.example``.
- ``NORTHWIND_POPPY_JSON``: path to the ``poppy.json`` Frontdoor generated for the domain.
- ``NORTHWIND_SIGNING_KEY`` (optional): the private EC P-256 JWK login responses are signed
  with; generated at start when absent (fine for one process, not for several).
- ``NORTHWIND_DEMO_PASSWORD`` (optional): the demo accounts' password; ``northwind-demo``
  when absent (development only).
- ``NORTHWIND_LEDGER_URL`` (optional): Frontdoor's ledger base URL with your slug; turns
  operations (ordering) on.
- ``NORTHWIND_WEBHOOK_SECRET`` (optional): the perform webhook's ``whsec_...`` secret (several
  separated by spaces or commas while rotating); turns ``/webhooks/frontdoor`` on.
"""

import os

from northwind.app import create_app
from northwind.config import NorthwindConfig

app = create_app(NorthwindConfig.from_env(os.environ))
