"""`pdd-emu link --backend kernel`: shape the relay's interfaces with qdiscs, or say why not.

The relay forwards bytes unshaped while qdiscs shape the interface that routes
to the upstream (`up`) and the one holding the listen address (`down`). Where
that cannot work (no netem in this kernel, loopback paths, a wildcard listen
address) one line says why and the caller falls back to the userspace backend.
"""

from __future__ import annotations

import socket
from typing import Callable

from netem.config import LinkConfig
from netem.kernel.backend import Interface, KernelLink, check_available
from netem.kernel.qdisc import KernelUnsupported


def _resolve(host: str) -> str:
    try:
        return socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)[0][4][0]
    except socket.gaierror as err:
        raise KernelUnsupported(f"cannot resolve {host!r}: {err.strerror}") from None


def interfaces_for(listen_host: str, upstream_host: str) -> tuple[str, str]:
    """(the interface routing to the upstream, the one holding the listen address)."""
    from pyroute2 import IPRoute

    if listen_host in ("", "0.0.0.0", "::"):
        raise KernelUnsupported("--listen is a wildcard address, so no one interface faces the clients; "
                                "listen on that interface's address")
    listen_ip, upstream_ip = _resolve(listen_host), _resolve(upstream_host)
    with IPRoute() as ipr:
        routes = ipr.route("get", dst=upstream_ip)
        up_index = routes[0].get_attr("RTA_OIF") if routes else None
        down_index = next((a["index"] for a in ipr.get_addr() if a.get_attr("IFA_ADDRESS") == listen_ip), None)
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
    if down_index is None:
        raise KernelUnsupported(f"no interface holds the listen address {listen_ip}")
    up, down = names.get(up_index), names.get(down_index)
    if "lo" in (up, down) or up is None:
        raise KernelUnsupported("the path runs over loopback, where qdiscs would shape every local connection")
    return up, down  # type: ignore[return-value]


def kernel_shaping(
    config: LinkConfig, listen: tuple[str, int], upstream: tuple[str, int], report: Callable[[str], None]
) -> KernelLink | None:
    """Apply `config` as qdiscs and return the KernelLink, or report one line and return None."""
    try:
        check_available(config)  # probe first: a missing qdisc is the reason users most need to hear
        up, down = interfaces_for(listen[0], upstream[0])
        link = KernelLink(Interface(up), Interface(down), config)
        link.apply()
    except KernelUnsupported as err:
        report(f"pdd-emu link: kernel backend unavailable: {err.reason}; falling back to the userspace backend")
        return None
    report(f"pdd-emu link: kernel backend shaping up on {up}, down on {down}")
    return link
