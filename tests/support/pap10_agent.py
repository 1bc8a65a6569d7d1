"""An independent PAP 1.0 personal agent: delegated ``Poppy-Session`` JWTs, written from the sources only.

Sources: the profile pinned to "published 0.3" (cited **[S §n]**) and ADR 0004. Nothing here
imports or mirrors Frontdoor's ``frontdoor_protocol`` or ``frontdoor_sdk``: every JWS is
built byte by byte with ``cryptography`` (so a test can produce any malformed variant), the
HTTP goes through ``httpx``. What the agent does:

- **identity** [S §3]: a CIMD at its exact ``client_id`` and a JWKS at ``jwks_uri`` on the same
  host, published on the tests' pretend internet (:meth:`Pap10Agent.publish`, as
  ``tests/support/agent.py`` does) or on a real loopback server (:meth:`Pap10Agent.serve`);
- **delegation** [S §3]: the identity key signs ``typ poppy-delegation+jwt`` with ``cnf.jwk`` of a
  short-lived P-256 key, at most 24 h; :meth:`Pap10Agent.rotate` makes a new delegated key;
- **Session JWT** [S §3]: a fresh ``typ poppy-session+jwt`` for every request (``iss``, ``aud``,
  ``sid``, ``sub``, ``agent_id``?, ``htm``, ``htu``, ``iat``, ``jti``, ``ath`` with a token);
- **discovery** [S §2]: ``poppy.json``, the domain's protected-resource metadata and the issuer's
  RFC 8414 metadata, cross-checked (:func:`discover`);
- **account access** [S §5]: Device and Direct Sign-In with a client assertion (``aud`` = the
  issuer; PKCE S256; ``state`` and RFC 9207 ``iss`` checked), refresh and revocation;
- **recovery** [S §4]: ``session_ended`` starts a new ``sid`` and retries once.

Every knob of :class:`Knobs` produces one malformed variant for the tests.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import httpx
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

POPPY_SESSION = "Poppy-Session"
SESSION_TYP = "poppy-session+jwt"
DELEGATION_TYP = "poppy-delegation+jwt"
DEVICE_CODE = "urn:ietf:params:oauth:grant-type:device_code"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
DAY = 86400
_DROP = object()  # a knob value meaning "leave this member out"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _int_b64(n: int, size: int) -> str:
    return b64(n.to_bytes(size, "big"))


def ath_of(token: str) -> str:
    """BASE64URL(SHA-256(token)) [S §3]."""
    return b64(hashlib.sha256(token.encode("ascii")).digest())


# --------------------------------------------------------------------------------------------------- keys


@dataclass
class EcKey:
    """A P-256 key: signs ES256, publishes its public JWK, has an RFC 7638 thumbprint."""

    private: ec.EllipticCurvePrivateKey = field(default_factory=lambda: ec.generate_private_key(ec.SECP256R1()))

    def public_jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        return {"kty": "EC", "crv": "P-256", "x": _int_b64(numbers.x, 32), "y": _int_b64(numbers.y, 32)}

    def private_jwk(self) -> dict[str, str]:
        return {**self.public_jwk(), "d": _int_b64(self.private.private_numbers().private_value, 32)}

    def thumbprint(self) -> str:
        """RFC 7638: the required members in lexicographic order, no whitespace, SHA-256."""
        jwk = self.public_jwk()
        canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
        return b64(hashlib.sha256(canonical.encode()).digest())

    def sign(self, data: bytes) -> bytes:
        r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")


@dataclass
class RsaKey:
    """An RSA key for PS384 delegations (recommended support [S §3])."""

    private: rsa.RSAPrivateKey = field(default_factory=lambda: rsa.generate_private_key(65537, 2048))

    def public_jwk(self) -> dict[str, str]:
        numbers = self.private.public_key().public_numbers()
        size = (numbers.n.bit_length() + 7) // 8
        return {"kty": "RSA", "n": _int_b64(numbers.n, size), "e": b64(numbers.e.to_bytes(3, "big"))}

    def thumbprint(self) -> str:
        jwk = self.public_jwk()
        canonical = json.dumps({k: jwk[k] for k in ("e", "kty", "n")}, separators=(",", ":"))
        return b64(hashlib.sha256(canonical.encode()).digest())

    def sign(self, data: bytes) -> bytes:
        return self.private.sign(data, padding.PSS(mgf=padding.MGF1(hashes.SHA384()), salt_length=48),
                                 hashes.SHA384())


def compact(header: dict[str, Any], claims: dict[str, Any], key: EcKey | RsaKey) -> str:
    """A compact JWS over exactly this header and these claims, signed by ``key`` whatever ``alg`` says."""
    signing_input = (b64(json.dumps(header, separators=(",", ":")).encode()) + "."
                     + b64(json.dumps(claims, separators=(",", ":")).encode()))
    return signing_input + "." + b64(key.sign(signing_input.encode("ascii")))


def _apply(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for name, value in over.items():
        if value is _DROP:
            out.pop(name, None)
        else:
            out[name] = value
    return out


# ------------------------------------------------------------------------------------------------- knobs


@dataclass(frozen=True)
class Knobs:
    """One request's deviations from a correct Session JWT (each test sets one).

    ``header`` and ``claims`` override members (the value :data:`DROP` removes one);
    ``sign_with_identity`` signs the Session JWT with the identity key itself [S §3];
    ``iat_offset`` moves ``iat``; ``ath`` forces a value (``DROP`` omits it) whatever token is
    sent; ``token`` sends that access token instead of the agent's; ``authorization`` replaces
    the whole ``Authorization`` value; ``no_session`` sends no ``Poppy-Session``;
    ``twice`` sends two ``Poppy-Session`` headers.
    """

    header: dict[str, Any] = field(default_factory=dict)
    claims: dict[str, Any] = field(default_factory=dict)
    sign_with_identity: bool = False
    iat_offset: int = 0
    ath: Any = None
    token: str | None = None
    authorization: str | None = None
    no_session: bool = False
    twice: bool = False


DROP = _DROP


# ---------------------------------------------------------------------------------------------- sessions


@dataclass
class Session:
    """The agent's Session at one company: it names ``sid`` itself; a new one starts signed out [S §3]."""

    sub: str
    sid: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    agent_id: str | None = None

    def renewed(self) -> Session:
        return replace(self, sid=secrets.token_urlsafe(24))


@dataclass
class Tokens:
    """What sign-in returned: an access token (Bearer or DPoP) and a refresh token [S §5]."""

    access_token: str
    token_type: str
    refresh_token: str | None
    scope: str | None
    expires_in: int | None

    @classmethod
    def of(cls, body: dict[str, Any]) -> Tokens:
        return cls(access_token=body["access_token"], token_type=body.get("token_type", "Bearer"),
                   refresh_token=body.get("refresh_token"), scope=body.get("scope"),
                   expires_in=body.get("expires_in"))


@dataclass
class Discovery:
    """The three documents [S §2], cross-checked: the company identifier is the issuer."""

    domain: str
    poppy: dict[str, Any]
    resource_metadata: dict[str, Any]
    issuer_metadata: dict[str, Any]

    @property
    def issuer(self) -> str:
        return str(self.issuer_metadata["issuer"])

    @property
    def company_id(self) -> str:
        return self.issuer

    @property
    def token_endpoint(self) -> str:
        return str(self.issuer_metadata["token_endpoint"])

    @property
    def operations_endpoint(self) -> str | None:
        ops = (self.poppy.get("extensions") or {}).get("operations") or {}
        return ops.get("endpoint")


class DiscoveryError(Exception):
    """The documents do not point at each other [S §2]: the agent stops; ``code`` names the check."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


class SignInError(Exception):
    """Sign-in did not complete; ``code`` names why (``state``, ``iss``, an OAuth error)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


# ------------------------------------------------------------------------------------------------- agent


@dataclass
class PendingAuthorization:
    """A Direct Sign-In in flight: what the redirect must carry back."""

    url: str
    state: str
    verifier: str
    redirect_uri: str


@dataclass
class Pap10Agent:
    """A 1.0 agent: identity keys behind its CIMD, a delegated key, Sessions, tokens.

    ``origin`` is where its documents live (``https://{host}`` on the pretend internet, or a
    loopback ``http://127.0.0.1:port`` from :meth:`serve`). ``clock`` gives the agent's NumericDate.
    """

    origin: str = field(default_factory=lambda: f"https://agent-{secrets.token_hex(5)}.example")
    name: str = "PAP 1.0 Test Agent"
    clock: Callable[[], int] = field(default=lambda: int(time.time()))
    identity: EcKey | RsaKey = field(default_factory=EcKey)
    extra_identity_keys: list[EcKey | RsaKey] = field(default_factory=list)
    extensions: dict[str, Any] = field(default_factory=lambda: {"operations": {"version": "1"}})
    minimal_metadata: bool = False
    delegation_lifetime: int = 3600
    dpop_tokens: bool = False
    delegated: EcKey = field(default_factory=EcKey)
    delegation: str = ""
    tokens: Tokens | None = None
    dpop_key: EcKey = field(default_factory=EcKey)
    callbacks: list[dict[str, str]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    def __post_init__(self) -> None:
        if not self.delegation:
            self.delegation = self.mint_delegation()

    # -- identity and documents [S §3]

    @property
    def client_id(self) -> str:
        return f"{self.origin}/agent.json"

    @property
    def jwks_uri(self) -> str:
        return f"{self.origin}/jwks.json"

    @property
    def redirect_uri(self) -> str:
        return f"{self.origin}/callback"

    def identity_alg(self, key: EcKey | RsaKey | None = None) -> str:
        return "PS384" if isinstance(key or self.identity, RsaKey) else "ES256"

    def metadata(self) -> dict[str, Any]:
        """The CIMD. Signed-out use needs only ``client_id`` and ``jwks_uri`` [S §3]."""
        doc: dict[str, Any] = {"client_id": self.client_id, "jwks_uri": self.jwks_uri}
        if not self.minimal_metadata:
            doc.update({"client_name": self.name, "redirect_uris": [self.redirect_uri],
                        "token_endpoint_auth_method": "private_key_jwt"})
            if self.extensions:
                doc["extensions"] = self.extensions
        return doc

    def jwks(self) -> dict[str, Any]:
        keys = []
        for key in [self.identity, *self.extra_identity_keys]:
            keys.append({**key.public_jwk(), "kid": key.thumbprint(), "use": "sig", "alg": self.identity_alg(key)})
        return {"keys": keys}

    def publish(self, web: Any) -> Pap10Agent:
        """Serve the CIMD and JWKS on the tests' pretend internet (a ``MockWeb``)."""
        web.serve(self.client_id, json=self.metadata(), headers={"cache-control": "max-age=300"})
        web.serve(self.jwks_uri, json=self.jwks(), headers={"cache-control": "max-age=300"})
        return self

    @contextmanager
    def serve(self) -> Iterator[Pap10Agent]:
        """Serve the documents (and the Direct Sign-In callback) on a real loopback port."""
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path, _, query = self.path.partition("?")
                if path == "/callback":
                    agent.callbacks.append(dict(parse_qsl(query)))
                    self._send(200, b"<!doctype html><title>Done</title><p>Back at the agent.</p>", "text/html")
                    return
                doc = {"/agent.json": agent.metadata(), "/jwks.json": agent.jwks()}.get(path)
                self._send(200 if doc else 404, json.dumps(doc or {"error": "not_found"}).encode(),
                           "application/json")

            def _send(self, status: int, body: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Cache-Control", "max-age=300")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{server.server_address[1]}"
        self.delegation = self.mint_delegation()  # its iss is the new client_id
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            server.shutdown()
            server.server_close()

    # -- delegation [S §3]

    def mint_delegation(self, *, key: EcKey | None = None, lifetime: int | None = None, iat: int | None = None,
                        header: dict[str, Any] | None = None, claims: dict[str, Any] | None = None,
                        signer: EcKey | RsaKey | None = None) -> str:
        """The identity key vouches for a delegated P-256 key: ``cnf.jwk``, ``exp − iat ≤ 24 h``."""
        signer = signer or self.identity
        issued = self.clock() if iat is None else iat
        head = _apply({"typ": DELEGATION_TYP, "alg": self.identity_alg(signer), "kid": signer.thumbprint()},
                      header or {})
        body = _apply({"iss": self.client_id, "cnf": {"jwk": (key or self.delegated).public_jwk()},
                       "iat": issued, "exp": issued + (lifetime or self.delegation_lifetime),
                       "jti": secrets.token_urlsafe(18)}, claims or {})
        return compact(head, body, signer)

    def rotate(self) -> EcKey:
        """A new delegated key and its delegation; the Session stays the same [S §3]."""
        self.delegated = EcKey()
        self.delegation = self.mint_delegation()
        return self.delegated

    def rotate_identity(self) -> None:
        """A new identity key (publish again to make it visible): the old delegation stops verifying."""
        self.identity = EcKey()
        self.delegation = self.mint_delegation()

    # -- the Session JWT [S §3]

    def session_jwt(self, session: Session, *, aud: str, method: str, url: str, access_token: str | None = None,
                    knobs: Knobs | None = None) -> str:
        k = knobs or Knobs()
        signer: EcKey | RsaKey = self.identity if k.sign_with_identity else self.delegated
        head = _apply({"typ": SESSION_TYP, "alg": "ES256", "kid": signer.thumbprint(), "poppy_dlg": self.delegation},
                      k.header)
        claims: dict[str, Any] = {"iss": self.client_id, "aud": aud, "sid": session.sid, "sub": session.sub,
                                  "htm": method, "htu": htu_of(url), "iat": self.clock() + k.iat_offset,
                                  "jti": secrets.token_urlsafe(18)}
        if session.agent_id is not None:
            claims["agent_id"] = session.agent_id
        if k.ath is not None:
            if k.ath is not _DROP:
                claims["ath"] = k.ath
        elif access_token is not None:
            claims["ath"] = ath_of(access_token)
        return compact(head, _apply(claims, k.claims), signer)

    def dpop_proof(self, method: str, url: str, token: str | None = None) -> str:
        """An RFC 9449 proof with the agent's DPoP key (for DPoP-bound tokens only [S §5])."""
        claims: dict[str, Any] = {"htm": method, "htu": htu_of(url), "iat": self.clock(),
                                  "jti": secrets.token_urlsafe(18)}
        if token is not None:
            claims["ath"] = ath_of(token)
        return compact({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.dpop_key.public_jwk()}, claims,
                       self.dpop_key)

    def request_headers(self, session: Session, *, aud: str, method: str, url: str, signed_in: bool = True,
                        knobs: Knobs | None = None) -> list[tuple[str, str]]:
        """The headers of one API request: a fresh Session JWT, and the access token when signed in."""
        k = knobs or Knobs()
        token = k.token or (self.tokens.access_token if (signed_in and self.tokens) else None)
        out: list[tuple[str, str]] = []
        if not k.no_session:
            value = self.session_jwt(session, aud=aud, method=method, url=url, access_token=token, knobs=k)
            out.append((POPPY_SESSION, value))
            if k.twice:
                out.append((POPPY_SESSION, self.session_jwt(session, aud=aud, method=method, url=url,
                                                            access_token=token, knobs=k)))
        if k.authorization is not None:
            out.append(("Authorization", k.authorization))
        elif token is not None:
            scheme = self.tokens.token_type if (self.tokens and k.token is None) else "Bearer"
            out.append(("Authorization", f"{scheme} {token}"))
            if scheme.lower() == "dpop":
                out.append(("DPoP", self.dpop_proof(method, url, token)))
        return out

    async def call(self, http: httpx.AsyncClient, method: str, url: str, session: Session, *, aud: str,
                   json_body: Any = None, signed_in: bool = True, knobs: Knobs | None = None,
                   recover: bool = True) -> tuple[httpx.Response, Session]:
        """One API request; on ``session_ended`` a new ``sid`` and one retry, a second ends it [S §4].

        Returns the response and the Session the agent now uses.
        """
        response = await self._send(http, method, url, session, aud=aud, json_body=json_body,
                                    signed_in=signed_in, knobs=knobs)
        if recover and is_session_ended(response):
            session = session.renewed()
            response = await self._send(http, method, url, session, aud=aud, json_body=json_body,
                                        signed_in=signed_in, knobs=knobs)
        return response, session

    async def _send(self, http: httpx.AsyncClient, method: str, url: str, session: Session, *, aud: str,
                    json_body: Any, signed_in: bool, knobs: Knobs | None) -> httpx.Response:
        headers = self.request_headers(session, aud=aud, method=method, url=url, signed_in=signed_in, knobs=knobs)
        content = None
        if json_body is not None:
            content = json.dumps(json_body).encode()
            headers.append(("Content-Type", "application/json"))
        return await http.request(method, url, headers=headers, content=content)

    # -- account access [S §5]

    def client_assertion(self, issuer: str, **over: Any) -> str:
        """``iss = sub = client_id``, ``aud`` = the exact issuer (never the token endpoint), short-lived."""
        now = self.clock()
        claims = _apply({"iss": self.client_id, "sub": self.client_id, "aud": issuer, "iat": now, "exp": now + 60,
                         "jti": secrets.token_urlsafe(18)}, over)
        return compact({"alg": self.identity_alg(), "kid": self.identity.thumbprint(), "typ": "JWT"}, claims,
                       self.identity)

    def client_auth(self, issuer: str) -> dict[str, str]:
        return {"client_id": self.client_id, "client_assertion_type": CLIENT_ASSERTION_TYPE,
                "client_assertion": self.client_assertion(issuer)}

    async def token_request(self, http: httpx.AsyncClient, d: Discovery, form: dict[str, str]) -> httpx.Response:
        """A token request: no ``session_id`` (1.0 sign-in is independent of Session identity [S §5])."""
        headers = {"DPoP": self.dpop_proof("POST", d.token_endpoint)} if self.dpop_tokens else {}
        return await http.post(d.token_endpoint, data={**self.client_auth(d.issuer), **form}, headers=headers)

    async def start_device(self, http: httpx.AsyncClient, d: Discovery, scope: str) -> dict[str, Any]:
        endpoint = d.issuer_metadata.get("device_authorization_endpoint")
        if not endpoint:
            raise SignInError("no_device_endpoint")
        r = await http.post(endpoint, data={**self.client_auth(d.issuer), "scope": scope})
        if r.status_code != 200:
            raise SignInError(_error_of(r))
        return dict(r.json())

    async def poll_device(self, http: httpx.AsyncClient, d: Discovery, device_code: str) -> httpx.Response:
        r = await self.token_request(http, d, {"grant_type": DEVICE_CODE, "device_code": device_code})
        if r.status_code == 200:
            self.tokens = Tokens.of(r.json())
        return r

    def authorize(self, d: Discovery, scope: str, *, redirect_uri: str | None = None) -> PendingAuthorization:
        """Direct Sign-In: the authorization URL with PKCE S256 and a ``state`` [S §5]."""
        endpoint = d.issuer_metadata.get("authorization_endpoint")
        if not endpoint:
            raise SignInError("no_authorization_endpoint")
        verifier = secrets.token_urlsafe(48)
        state = secrets.token_urlsafe(18)
        redirect = redirect_uri or self.redirect_uri
        query = {"response_type": "code", "client_id": self.client_id, "redirect_uri": redirect, "scope": scope,
                 "state": state, "code_challenge_method": "S256",
                 "code_challenge": b64(hashlib.sha256(verifier.encode()).digest())}
        return PendingAuthorization(url=f"{endpoint}?{urlencode(query)}", state=state, verifier=verifier,
                                    redirect_uri=redirect)

    async def redeem(self, http: httpx.AsyncClient, d: Discovery, pending: PendingAuthorization,
                     returned: str | dict[str, str]) -> httpx.Response:
        """The browser came back: ``state`` and RFC 9207 ``iss`` must be ours before the code is used."""
        back = dict(parse_qsl(urlsplit(returned).query)) if isinstance(returned, str) else returned
        if back.get("state") != pending.state:
            raise SignInError("state")
        if back.get("iss") != d.issuer:
            raise SignInError("iss")
        if "code" not in back:
            raise SignInError(back.get("error", "no_code"))
        r = await self.token_request(http, d, {"grant_type": "authorization_code", "code": back["code"],
                                               "code_verifier": pending.verifier,
                                               "redirect_uri": pending.redirect_uri})
        if r.status_code == 200:
            self.tokens = Tokens.of(r.json())
        return r

    async def refresh(self, http: httpx.AsyncClient, d: Discovery, scope: str | None = None) -> httpx.Response:
        assert self.tokens is not None and self.tokens.refresh_token
        form = {"grant_type": "refresh_token", "refresh_token": self.tokens.refresh_token}
        if scope:
            form["scope"] = scope
        r = await self.token_request(http, d, form)
        if r.status_code == 200:
            body = r.json()
            body.setdefault("refresh_token", self.tokens.refresh_token)
            self.tokens = Tokens.of(body)
        return r

    async def revoke(self, http: httpx.AsyncClient, d: Discovery) -> httpx.Response:
        """Sign out: RFC 7009 revocation of the refresh token; the Session continues signed out [S §5]."""
        assert self.tokens is not None and self.tokens.refresh_token
        endpoint = d.issuer_metadata.get("revocation_endpoint") or f"{d.issuer}/oauth/revoke"
        r = await http.post(endpoint, data={**self.client_auth(d.issuer), "token": self.tokens.refresh_token,
                                            "token_type_hint": "refresh_token"})
        if r.status_code == 200:
            self.tokens = None
        return r


# ---------------------------------------------------------------------------------------------- helpers


def htu_of(url: str) -> str:
    """RFC 9449 §4.2 ``htu``: the URL without query or fragment, scheme and host lower case, default port dropped."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    port = parts.port
    default = {"https": 443, "http": 80}.get(parts.scheme.lower())
    netloc = host if port in (None, default) else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path or "/", "", ""))


def _error_of(r: httpx.Response) -> str:
    try:
        return str(r.json().get("error") or r.status_code)
    except ValueError:
        return str(r.status_code)


def is_session_ended(r: httpx.Response) -> bool:
    return r.status_code == 400 and _error_of(r) == "session_ended"


def metadata_url(issuer: str, well_known: str = "oauth-authorization-server") -> str:
    """RFC 8414 §3.1: the well-known segment goes before the issuer's path."""
    parts = urlsplit(issuer)
    return f"{parts.scheme}://{parts.netloc}/.well-known/{well_known}{parts.path.rstrip('/')}"


async def discover(http: httpx.AsyncClient, company: str, *, versions: tuple[str, ...] = ("1.0",),
                   loopback_dev: bool = False) -> Discovery:
    """The three documents, each pointing at the others exactly [S §2], or :class:`DiscoveryError`.

    ``company`` is ``https://{domain}``. A ``poppy.json`` naming a ``protocol_version`` outside
    ``versions`` is not used [S §1]. ``loopback_dev`` (a development stack on
    ``http://127.0.0.1:port``, whose documents name the company's real domain) skips the two
    checks that need that domain: ``organization.domain`` and ``protected_resources``.
    """
    origin = company.rstrip("/")
    domain = (urlsplit(origin).hostname or "").lower()
    if loopback_dev and not (origin.startswith("http://") and domain in ("127.0.0.1", "localhost", "::1")):
        raise DiscoveryError("not_loopback")
    r = await http.get(f"{origin}/.well-known/poppy.json")
    if r.status_code != 200:
        raise DiscoveryError("poppy_json_unavailable")
    poppy = r.json()
    if poppy.get("protocol_version") not in versions:
        raise DiscoveryError("unsupported_version")
    doc_domain = str((poppy.get("organization") or {}).get("domain") or "")
    if doc_domain.lower() != domain and not loopback_dev:  # ignoring case only; www is another host
        raise DiscoveryError("organization_domain_mismatch")
    r = await http.get(f"{origin}/.well-known/oauth-protected-resource")
    if r.status_code != 200:
        raise DiscoveryError("resource_metadata_unavailable")
    resource = r.json()
    if resource.get("resource") != origin:
        raise DiscoveryError("resource_mismatch")
    servers = resource.get("authorization_servers") or []
    declared = (poppy.get("auth") or {}).get("issuer")
    if len(servers) == 1:
        issuer = servers[0]
        if declared is not None and declared != issuer:
            raise DiscoveryError("auth_issuer_mismatch")
    elif len(servers) > 1:
        if declared not in servers:
            raise DiscoveryError("auth_issuer_not_listed")
        issuer = declared
    else:
        raise DiscoveryError("issuerless")  # Frontdoor never serves issuerless companies (ADR 0004 §2)
    r = await http.get(metadata_url(issuer))
    if r.status_code != 200:
        raise DiscoveryError("issuer_metadata_unavailable")
    meta = r.json()
    if meta.get("issuer") != issuer:
        raise DiscoveryError("issuer_mismatch")
    protected = {str(p).lower() for p in meta.get("protected_resources") or []}
    if origin.lower() not in protected and not loopback_dev:
        raise DiscoveryError("domain_not_protected")
    if "refresh_token" not in (meta.get("grant_types_supported") or []):
        raise DiscoveryError("no_refresh_grant")
    if not meta.get("token_endpoint") or not meta.get("revocation_endpoint"):
        raise DiscoveryError("no_token_endpoints")
    return Discovery(domain=domain, poppy=poppy, resource_metadata=resource, issuer_metadata=meta)


__all__ = [
    "DELEGATION_TYP",
    "DROP",
    "POPPY_SESSION",
    "SESSION_TYP",
    "Discovery",
    "DiscoveryError",
    "EcKey",
    "Knobs",
    "Pap10Agent",
    "PendingAuthorization",
    "RsaKey",
    "Session",
    "SignInError",
    "Tokens",
    "ath_of",
    "compact",
    "discover",
    "htu_of",
    "is_session_ended",
    "metadata_url",
]
