"""TXT lookups over real DNS with dnspython's asynchronous stub resolver."""

import dns.asyncresolver
import dns.exception
import dns.name
import dns.nameserver
import dns.rcode
import dns.rdatatype
import dns.resolver
from dns.rdtypes.ANY.TXT import TXT

from frontdoor_tenancy.domains.txt_lookup import (
    Absent,
    Found,
    Indeterminate,
    IndeterminateReason,
    TxtLookupResult,
)


class TxtResolver:
    """Resolves TXT records, classifying every outcome instead of raising.

    Answers are never cached: a verification must see the record as it is now,
    and the worker's schedule already spaces lookups out.

    Args:
        nameservers: ``(address, port)`` pairs to query, in order (e.g. from
            ``FRONTDOOR_DNS_NAMESERVERS``); ``None`` uses the system resolver
            configuration (``/etc/resolv.conf``).
        timeout: Seconds to wait for one server to answer one query.
        lifetime: Seconds the whole lookup may take, retries included.

    Raises:
        ValueError: If ``nameservers`` is an empty list or a timeout is not
            positive.
        dns.resolver.NoResolverConfiguration: If ``nameservers`` is ``None``
            and the system has no resolver configuration.
    """

    def __init__(
        self,
        nameservers: list[tuple[str, int]] | None = None,
        *,
        timeout: float = 2.0,
        lifetime: float = 5.0,
    ) -> None:
        if timeout <= 0 or lifetime <= 0:
            raise ValueError("timeout and lifetime must be positive")
        if nameservers is None:
            resolver = dns.asyncresolver.Resolver(configure=True)
        else:
            if not nameservers:
                raise ValueError("nameservers must not be empty; pass None for the system resolver")
            resolver = dns.asyncresolver.Resolver(configure=False)
            resolver.nameservers = [dns.nameserver.Do53Nameserver(address, port) for address, port in nameservers]
        resolver.timeout = timeout
        resolver.lifetime = lifetime
        resolver.cache = None
        self._resolver = resolver

    async def lookup(self, name: str) -> TxtLookupResult:
        """Resolve the TXT records at ``name``.

        Args:
            name: An absolute ASCII DNS name, with or without trailing dot.
                Search domains are never appended.

        Returns:
            :class:`Found`, :class:`Absent` or :class:`Indeterminate`.

        Raises:
            ValueError: If ``name`` is not a valid DNS name (a programming
                error: callers pass names built by ``challenge_name``).
        """
        try:
            qname = dns.name.from_text(name)
        except dns.exception.DNSException as exc:
            raise ValueError("not a valid DNS name") from exc
        try:
            answer = await self._resolver.resolve(qname, dns.rdatatype.TXT, search=False)
        except dns.resolver.NXDOMAIN:
            return Absent("nxdomain")
        except dns.resolver.NoAnswer:
            return Absent("no_answer")
        except dns.exception.Timeout:
            return Indeterminate("timeout")
        except dns.resolver.NoNameservers as exc:
            return Indeterminate(_classify_server_failures(exc))
        except dns.exception.DNSException:
            return Indeterminate("error")
        return Found(tuple(_record_text(rdata) for rdata in answer if isinstance(rdata, TXT)))


def _record_text(rdata: TXT) -> str:
    # RFC 7208 §3.3 / RFC 1035 §3.3.14: a TXT record is a sequence of
    # character-strings of at most 255 octets; long values are split across
    # them and must be rejoined without a separator.
    return b"".join(rdata.strings).decode("utf-8", errors="replace")


def _classify_server_failures(exc: dns.resolver.NoNameservers) -> IndeterminateReason:
    # Every server was tried and dropped; report the most telling reason.
    # Entries are (server, tcp, port, exception-or-rcode-text, response).
    errors = exc.kwargs.get("errors") or []
    rcodes = {entry[4].rcode() for entry in errors if entry[4] is not None}
    if dns.rcode.SERVFAIL in rcodes:
        return "servfail"
    if dns.rcode.REFUSED in rcodes:
        return "refused"
    if any(isinstance(entry[3], dns.exception.Timeout) for entry in errors):
        return "timeout"
    return "error"
