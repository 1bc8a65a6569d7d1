"""What a new Session Token is bound to: its audience (RFC 8707) and its DPoP key (RFC 9449).

A check every grant calls after client authentication:

- ``resource`` must be one of the tenant's MCP servers (``invalid_target``); the token
  is then valid only there, and a Bearer token when that server has no DPoP support
  (PAP-4.3-09/10);
- otherwise exactly one DPoP proof for ``POST`` at the token endpoint, without ``ath``,
  with the tenant's server nonce when it requires one (``use_dpop_nonce`` carries a
  fresh ``DPoP-Nonce``). Its ``jti`` is returned as a `OneTimeValue` to claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from frontdoor_protocol.dpop_proof import verify_dpop_proof
from frontdoor_protocol.errors import ProtocolError

from .dpop_nonce import NonceSource
from .token_endpoint import SKEW, GrantRefused, OneTimeValue, TenantIssuer
from .token_request import TokenRequest

__all__ = ["TokenBinding", "TokenProof", "bind_token", "check_token_proof"]


@dataclass(frozen=True, slots=True)
class TokenBinding:
    """The audience and key of the token to issue.

    Attributes:
        audience: The issuer, or the MCP server's ``url``.
        resource: The MCP server's ``url`` when one was asked for.
        bearer: A Bearer token (an MCP server without DPoP support).
        jkt: The DPoP key thumbprint to bind (``cnf.jkt``), None for Bearer.
        one_time: The proof's ``jti`` to claim, None for Bearer.
        headers: Headers for the response (a fresh ``DPoP-Nonce``).
    """

    audience: str
    resource: str | None
    bearer: bool
    jkt: str | None
    one_time: OneTimeValue | None
    headers: dict[str, str] = field(default_factory=dict)


def bind_token(nonces: NonceSource, tenant: TenantIssuer, req: TokenRequest, *, now: int) -> TokenBinding:
    """Check ``resource`` and the DPoP proof of a token request.

    Raises:
        ProtocolError: ``invalid_target``, ``invalid_dpop_proof``.
        GrantRefused: ``use_dpop_nonce`` with the ``DPoP-Nonce`` to use.
    """
    s = tenant.settings
    bearer = False
    audience = tenant.issuer
    if req.resource is not None:
        api = next((a for a in s.apis if a.type == "mcp" and a.url == req.resource), None)
        if api is None:
            raise ProtocolError("invalid_target", "The resource is not one of this company's MCP servers.")
        audience = api.url
        bearer = not api.supports_dpop
    if bearer:
        return TokenBinding(audience=audience, resource=req.resource, bearer=True, jkt=None, one_time=None)
    proof = check_token_proof(nonces, tenant, req.dpop, now=now)
    return TokenBinding(audience=audience, resource=req.resource, bearer=False, jkt=proof.jkt,
                        one_time=proof.one_time, headers=proof.headers)


@dataclass(frozen=True, slots=True)
class TokenProof:
    """A token request's verified DPoP proof.

    Attributes:
        jkt: The proof key's thumbprint, to bind (``cnf.jkt``).
        one_time: The proof's ``jti`` to claim.
        headers: Headers for the response (a fresh ``DPoP-Nonce`` when the tenant requires nonces).
    """

    jkt: str
    one_time: OneTimeValue
    headers: dict[str, str]


def check_token_proof(nonces: NonceSource, tenant: TenantIssuer, dpop: tuple[str, ...], *, now: int) -> TokenProof:
    """Check the one DPoP proof of a token request (``POST`` at the token endpoint, no ``ath``).

    Raises:
        ProtocolError: ``invalid_dpop_proof``.
        GrantRefused: ``use_dpop_nonce`` with the ``DPoP-Nonce`` to use.
    """
    required = tenant.settings.dpop_nonce_required
    if len(dpop) != 1:
        raise ProtocolError("invalid_dpop_proof", "Send exactly one DPoP proof.")
    accepted = nonces.accepted(tenant.tenant_id, now) if required else None
    try:
        proof = verify_dpop_proof(dpop[0], method="POST", url=tenant.token_endpoint, now=now,
                                  access_token=None, nonce=accepted, require_nonce=required)
    except ProtocolError as exc:
        if exc.code == "use_dpop_nonce":
            raise GrantRefused(exc, {"DPoP-Nonce": nonces.current(tenant.tenant_id, now)}) from None
        raise
    headers = {"DPoP-Nonce": nonces.current(tenant.tenant_id, now)} if required else {}
    one_time = OneTimeValue("dpop", f"{tenant.tenant_id}\x00{proof.jkt}", proof.jti,
                            max(proof.accept_until - now, 1) + SKEW,
                            ProtocolError("invalid_dpop_proof", "The DPoP proof was already used."))
    return TokenProof(jkt=proof.jkt, one_time=one_time, headers=headers)
