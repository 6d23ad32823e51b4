"""Kernel backend: netem, tbf and htb qdiscs through pyroute2, probed before use."""

from netem.kernel.backend import Interface, KernelLink
from netem.kernel.probe import Probe, probe_netem, probe_qdisc
from netem.kernel.qdisc import KernelUnsupported, NetemExtras, plan

__all__ = ["Interface", "KernelLink", "KernelUnsupported", "NetemExtras", "Probe", "plan", "probe_netem", "probe_qdisc"]
