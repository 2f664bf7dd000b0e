"""Whether a base URL names a server on this machine or a private network, by its host alone.

Loopback, `localhost`, `*.localhost`, `*.local` (mDNS), the RFC 1918 ranges, link-local and
IPv6 unique-local addresses are local; any other host name or address is a hosted API. No
name is resolved: the decision must not cost a DNS lookup or depend on one.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOCAL_NETWORKS = tuple(
    ipaddress.ip_network(n)
    for n in (
        "127.0.0.0/8",
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "169.254.0.0/16",
        "0.0.0.0/32",
        "::1/128",
        "::/128",
        "fe80::/10",
        "fc00::/7",
    )
)


def host_of(base_url: str) -> str:
    """The host of a base URL, lower case, without brackets, port or trailing dot."""
    try:
        host = urlsplit(base_url if "//" in base_url else "//" + base_url).hostname or ""
    except ValueError:
        return ""
    return host.rstrip(".").lower()


def is_local(base_url: str) -> bool:
    """True when the base URL's host is this machine or a private network."""
    host = host_of(base_url)
    if not host:
        return False
    if host == "localhost" or host.endswith((".localhost", ".local")):
        return True
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])  # fe80::1%eth0
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped:
        address = address.ipv4_mapped
    return any(address in network for network in _LOCAL_NETWORKS)
