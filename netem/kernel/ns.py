"""Network namespaces and veth pairs: the sandbox the kernel backend is tried and tested in.

Everything here is created under a unique name and removed by the same code
that made it; `in_netns` runs a function on a short-lived thread that has
entered a namespace (setns changes only the calling thread), so files under
/proc/sys/net and sockets it opens belong to that namespace.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
from typing import Any, Callable, Iterator, TypeVar

T = TypeVar("T")
_counter = itertools.count()


def unique_name(prefix: str) -> str:
    """A name for a namespace or interface, unique on this host, at most 15 characters."""
    return f"{prefix}{os.getpid() % 100000}x{next(_counter)}"[:15]


def create_netns(name: str) -> None:
    from pyroute2 import IPRoute, netns

    netns.create(name)
    with IPRoute(netns=name) as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def remove_netns(name: str) -> None:
    from pyroute2 import netns

    if name in netns.listnetns():
        netns.remove(name)


def in_netns(name: str | None, func: Callable[[], T]) -> T:
    """Run func inside namespace `name` (None: here) and return its result or raise its error."""
    if name is None:
        return func()
    from pyroute2 import netns

    box: dict[str, Any] = {}

    def body() -> None:
        try:
            netns.setns(name, flags=0)  # flags=0: never create a missing namespace
            box["result"] = func()
        except BaseException as err:  # handed to the caller below
            box["error"] = err

    thread = threading.Thread(target=body, name=f"netns-{name}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["result"]


@contextlib.contextmanager
def veth_pair(ns_a: str, ns_b: str, if_a: str, if_b: str, addr_a: str, addr_b: str, prefix: int = 24) -> Iterator[None]:
    """A cable between two namespaces, addressed and up; removed on exit."""
    from pyroute2 import IPRoute

    with IPRoute(netns=ns_a) as ipr:
        ipr.link("add", ifname=if_a, kind="veth", peer={"ifname": if_b, "net_ns_fd": ns_b})
    try:
        for name, ifname, addr in ((ns_a, if_a, addr_a), (ns_b, if_b, addr_b)):
            with IPRoute(netns=name) as ipr:
                index = ipr.link_lookup(ifname=ifname)[0]
                ipr.addr("add", index=index, address=addr, prefixlen=prefix)
                ipr.link("set", index=index, state="up")
        yield
    finally:
        with IPRoute(netns=ns_a) as ipr:
            found = ipr.link_lookup(ifname=if_a)
            if found:
                ipr.link("del", index=found[0])  # deleting one end removes the pair


@contextlib.contextmanager
def scratch_interface() -> Iterator[tuple[str | None, str]]:
    """(netns, ifname) of an interface nobody uses: a fresh namespace's lo, else a new veth here."""
    from pyroute2 import IPRoute, NetlinkError

    name = unique_name("pddprobe")
    try:
        create_netns(name)
    except OSError:
        name = ""
    if name:
        try:
            yield name, "lo"
        finally:
            remove_netns(name)
        return
    ifname = unique_name("pddp")
    with IPRoute() as ipr:
        ipr.link("add", ifname=ifname, kind="veth", peer=unique_name("pddq"))
    try:
        yield None, ifname
    finally:
        with IPRoute() as ipr, contextlib.suppress(NetlinkError, IndexError):
            ipr.link("del", index=ipr.link_lookup(ifname=ifname)[0])
