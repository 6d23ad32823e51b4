"""KernelLink: the same LinkConfig, applied as qdiscs on two interfaces' egress.

`up` shapes what leaves the interface facing the upstream, `down` what leaves
the interface facing the clients (in a namespace lab: the two ends of a veth).
Missing qdiscs are found by probing first, and refused with the probe's reason.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Mapping

from netem.config import DIRECTIONS, Direction, LinkConfig
from netem.kernel.probe import probe_qdisc
from netem.kernel.qdisc import ASSUMED_LINE_BPS, KernelUnsupported, NetemExtras, QdiscStep, Shaper, plan
from netem.kernel.sysctl import raise_tcp_buffers


@dataclass(frozen=True)
class Interface:
    ifname: str
    netns: str | None = None


class KernelLink:
    def __init__(
        self,
        up: Interface | None,
        down: Interface | None,
        config: LinkConfig | None = None,
        extras: NetemExtras | None = None,
        tune_buffers: bool = True,
        shaper: Shaper = "auto",
    ) -> None:
        self.interfaces: dict[Direction, Interface | None] = {"up": up, "down": down}
        self.config = config or LinkConfig()
        self.extras = extras or NetemExtras()
        self.tune_buffers = tune_buffers
        self.shaper: Shaper = shaper
        self.buffer_report: dict[str, dict[str, str]] = {}
        self._applied: dict[Direction, list[QdiscStep]] = {}

    def __enter__(self) -> KernelLink:
        self.apply()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.clear()

    def plans(self, config: LinkConfig) -> dict[Direction, list[QdiscStep]]:
        """Plan the shaped directions; raises KernelUnsupported if the kernel lacks a qdisc."""
        return check_available(config, self.extras, [s for s in DIRECTIONS if self.interfaces[s]], self.shaper)

    def apply(self) -> None:
        plans = self.plans(self.config)
        for side, steps in plans.items():
            self._install(self.interfaces[side], steps)  # type: ignore[arg-type]
            self._applied[side] = steps
        if self.tune_buffers:
            self._tune()

    def reconfigure(self, change: LinkConfig | Mapping[str, Any]) -> LinkConfig:
        new = change if isinstance(change, LinkConfig) else self.config.patched(change)
        plans = self.plans(new)
        for side, steps in plans.items():
            self._install(self.interfaces[side], steps, previous=self._applied.get(side))  # type: ignore[arg-type]
            self._applied[side] = steps
        self.config = new
        if self.tune_buffers:
            self._tune()
        return new

    def clear(self) -> None:
        from pyroute2 import NetlinkError

        for side, iface in self.interfaces.items():
            if iface is None or side not in self._applied:
                continue
            with _ipr(iface) as (ipr, index), contextlib.suppress(NetlinkError):
                ipr.tc("del", index=index, root=True)
            del self._applied[side]

    def read_back(self) -> dict[Direction, list[dict[str, Any]]]:
        """What the kernel reports on each interface: kind, handle, parent and rate in bit/s."""
        found: dict[Direction, list[dict[str, Any]]] = {}
        for side, iface in self.interfaces.items():
            if iface is None:
                continue
            with _ipr(iface) as (ipr, index):
                found[side] = [_describe(m, is_class=False) for m in ipr.get_qdiscs(index=index)]
                found[side] += [_describe(m, is_class=True) for m in ipr.get_classes(index=index)]
        return found

    def _install(self, iface: Interface, steps: list[QdiscStep], previous: list[QdiscStep] | None = None) -> None:
        from pyroute2 import NetlinkError

        same_shape = previous is not None and [(s.kind, s.handle) for s in previous] == [(s.kind, s.handle) for s in steps]
        with _ipr(iface) as (ipr, index):
            if not same_shape:
                with contextlib.suppress(NetlinkError):
                    ipr.tc("del", index=index, root=True)
            # "change" keeps the packets queued in place; a new shape has to be rebuilt.
            verb = "change" if same_shape else "add"
            for step in steps:
                extra = {"parent": step.parent} if step.parent else {}
                ipr.tc(verb, step.kind, index=index, handle=step.handle, **extra, **step.params)
                if step.class_params is not None:
                    params = dict(step.class_params)
                    ipr.tc(f"{verb}-class", step.kind, index=index, handle=params.pop("handle"), parent=step.handle, **params)

    def _tune(self) -> None:
        for side, iface in self.interfaces.items():
            if iface is None:
                continue
            rtt = self.config.rtt(side)
            if rtt > 0:
                rate = getattr(self.config, side).rate_bps or ASSUMED_LINE_BPS
                self.buffer_report[iface.netns or "-"] = raise_tcp_buffers(rate, rtt, iface.netns)


def check_available(
    config: LinkConfig, extras: NetemExtras | None = None, sides: list[Direction] | None = None, shaper: Shaper = "auto"
) -> dict[Direction, list[QdiscStep]]:
    """Plan each direction and probe every qdisc kind the plans use; raises KernelUnsupported."""
    plans = {side: plan(getattr(config, side), extras, shaper) for side in (sides or DIRECTIONS)}
    for kind in sorted({step.kind for steps in plans.values() for step in steps}):
        probe = probe_qdisc(kind)
        if not probe.ok:
            raise KernelUnsupported(probe.reason)
    return plans


@contextlib.contextmanager
def _ipr(iface: Interface):  # type: ignore[no-untyped-def]
    from pyroute2 import IPRoute

    with (IPRoute(netns=iface.netns) if iface.netns else IPRoute()) as ipr:
        found = ipr.link_lookup(ifname=iface.ifname)
        if not found:
            raise KernelUnsupported(f"no interface {iface.ifname!r} in namespace {iface.netns or '(host)'}")
        yield ipr, found[0]


def _describe(message: Any, is_class: bool) -> dict[str, Any]:
    kind = message.get_attr("TCA_KIND")
    options = message.get_attr("TCA_OPTIONS") or {}
    attrs = dict(options.get("attrs", [])) if isinstance(options, dict) else {}
    rate_bps = None
    if kind == "tbf" and "TCA_TBF_PARMS" in attrs:
        rate_bps = attrs["TCA_TBF_PARMS"]["rate"] * 8
    elif kind == "htb" and "TCA_HTB_PARMS" in attrs:
        rate_bps = (attrs.get("TCA_HTB_RATE64") or attrs["TCA_HTB_PARMS"]["rate"]) * 8
    handle, parent = message["handle"], message["parent"]
    return {
        "kind": kind,
        "handle": f"{handle >> 16:x}:{handle & 0xFFFF:x}",
        "parent": "root" if parent == 0xFFFFFFFF else f"{parent >> 16:x}:{parent & 0xFFFF:x}",
        "class": is_class,
        "rate_bps": rate_bps,
    }
