#!/usr/bin/env python3
"""Onboard a company using nothing but HTTP (Python standard library only).

    python scripts/onboard.py --console http://127.0.0.1:8000 --issuer http://127.0.0.1:8001 \\
        --slug acme --email owner@acme.example --domain acme.example

1. signs up (prints the one-time API key),
2. claims the domain and prints the TXT record to publish,
3. waits until ``POST /api/v1/domains/{domain}/verify`` answers ``verified``,
4. reads the issuer metadata and shows the domain in ``poppy_domains``.

``--api-key`` skips sign-up for an existing tenant.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
import urllib.error
import urllib.request
from typing import Any


def call(method: str, url: str, body: Any = None, key: str | None = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)  # noqa: S310 - the operator's own URLs
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:  # noqa: S310
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--console", default="http://127.0.0.1:8000")
    p.add_argument("--issuer", default="http://127.0.0.1:8001")
    p.add_argument("--slug", help="required for sign-up")
    p.add_argument("--email", help="required for sign-up")
    p.add_argument("--password", default=None, help="default: a random one, printed")
    p.add_argument("--organization", default=None)
    p.add_argument("--domain", required=True)
    p.add_argument("--api-key", default=None)
    p.add_argument("--wait", type=float, default=300.0, help="seconds to wait for the TXT record")
    a = p.parse_args(argv)

    key = a.api_key
    if key is None and not (a.slug and a.email):
        p.error("--slug and --email are required unless --api-key is given")
    if key is None:
        password = a.password or "pw-" + secrets.token_urlsafe(16)
        status, body = call("POST", f"{a.console}/api/v1/signup", {
            "email": a.email, "password": password, "organization_name": a.organization or a.slug, "slug": a.slug})
        if status != 201:
            print(f"sign-up failed: {status} {body}", file=sys.stderr)
            return 1
        key = body["api_key"]
        print(f"tenant {body['tenant']['id']}  issuer {body['tenant']['issuer']}")
        print(f"admin password: {password}")
        print(f"API key (shown once, keep it): {key}")

    status, body = call("POST", f"{a.console}/api/v1/domains", {"domain": a.domain}, key)
    if status == 409:
        status, body = call("GET", f"{a.console}/api/v1/domains/{a.domain}", None, key)
    if status not in (200, 201):
        print(f"adding the domain failed: {status} {body}", file=sys.stderr)
        return 1
    domain = body["domain"]
    print(f"publish:  {body['txt']['name']}  TXT  \"{body['txt']['value']}\"")

    deadline = time.monotonic() + a.wait
    while True:
        status, body = call("POST", f"{a.console}/api/v1/domains/{domain}/verify", None, key)
        if status == 200 and body["status"] == "verified":
            print(f"{domain} verified")
            break
        if time.monotonic() > deadline:
            print(f"not verified yet ({body.get('last_check_result') if body else status})", file=sys.stderr)
            return 2
        time.sleep(2)

    status, tenant = call("GET", f"{a.console}/api/v1/tenant", None, key)
    status, meta = call("GET", f"{a.issuer}/.well-known/oauth-authorization-server/{tenant['slug']}")
    print(f"issuer metadata poppy_domains: {meta['poppy_domains']}")
    return 0 if domain in meta["poppy_domains"] else 3


if __name__ == "__main__":
    raise SystemExit(main())
