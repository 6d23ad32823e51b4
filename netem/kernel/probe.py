"""Does this kernel have a qdisc? Ask it, in a throwaway place, once per process.

The probe adds the qdisc to the loopback of a fresh network namespace (or, where
namespaces cannot be made, to a short-lived veth pair) and removes it again, so
nothing a user relies on is touched. The answer is one line a person can act on.
"""

from __future__ import annotations

import errno
import functools
import os
from dataclasses import dataclass

from netem.kernel import ns

_MINIMAL = {
    "netem": {"delay": 1000},
    "tbf": {"rate": 125_000, "burst": 16_000, "limit": 64_000},
    "htb": {"default": 1},
}


@dataclass(frozen=True)
class Probe:
    kind: str
    ok: bool
    reason: str


@functools.cache
def probe_qdisc(kind: str) -> Probe:
    from pyroute2 import IPRoute, NetlinkError

    params = _MINIMAL[kind]
    try:
        with ns.scratch_interface() as (netns_name, ifname):
            with IPRoute(netns=netns_name) if netns_name else IPRoute() as ipr:
                index = ipr.link_lookup(ifname=ifname)[0]
                try:
                    ipr.tc("add", kind, index=index, handle="1:", **params)
                except NetlinkError as err:
                    if err.code in (errno.ENOENT, errno.EOPNOTSUPP):
                        return Probe(kind, False, f"this kernel has no sch_{kind} qdisc "
                                     f"(adding one fails: {os.strerror(err.code)})")
                    raise
                ipr.tc("del", index=index, root=True)
    except (OSError, NetlinkError) as err:
        code = getattr(err, "code", None) or getattr(err, "errno", None)
        if code in (errno.EPERM, errno.EACCES):
            return Probe(kind, False, f"probing the {kind} qdisc needs root or CAP_NET_ADMIN")
        return Probe(kind, False, f"cannot probe the {kind} qdisc: {err}")
    return Probe(kind, True, f"the {kind} qdisc is available")


def probe_netem() -> Probe:
    return probe_qdisc("netem")
