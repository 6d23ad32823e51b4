"""The kernel backend for real, inside throwaway namespaces: tbf and htb shape; netem if present."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from netem.config import LinkConfig
from netem.kernel.backend import Interface, KernelLink
from netem.kernel.ns import in_netns
from netem.kernel.probe import probe_netem, probe_qdisc
from netem.kernel.qdisc import KernelUnsupported
from netem.kernel.sysctl import raise_tcp_buffers
from tests.tolerance import assert_at_least, assert_close

pytestmark = [
    pytest.mark.kernel,
    pytest.mark.skipif(os.geteuid() != 0, reason="the kernel backend tests need root for namespaces and qdiscs"),
]
SIZE = 4_000_000


def shaped(lab, config: LinkConfig, **kw) -> KernelLink:
    return KernelLink(Interface(lab.if_a, lab.ns_a), Interface(lab.if_b, lab.ns_b), config, **kw)


def rate_of(entries: list[dict], kind: str) -> float | None:
    return next((e["rate_bps"] for e in entries if e["kind"] == kind and e["rate_bps"]), None)


def test_the_probe_gives_a_clear_answer():
    for kind in ("tbf", "htb"):
        assert probe_qdisc(kind).ok, probe_qdisc(kind).reason
    probe = probe_netem()
    assert probe.ok or "sch_netem" in probe.reason


def test_tbf_is_read_back_and_shapes_a_transfer(lab):
    with shaped(lab, LinkConfig.symmetric(rate="40mbit")) as link:
        found = link.read_back()
        assert [e["kind"] for e in found["up"] if not e["class"]] == ["tbf"]
        assert rate_of(found["up"], "tbf") == 40e6
        elapsed = lab.transfer(SIZE)
    assert_close(elapsed, SIZE * 8 / 40e6, rel=0.35, what="4 MB through tbf at 40 mbit")
    assert not [e for e in link.read_back()["up"] if e["kind"] == "tbf"]  # cleared on exit


def test_htb_carries_rates_above_34gbit_and_shapes_when_asked(lab):
    with shaped(lab, LinkConfig.symmetric(rate="40gbit")) as link:
        assert rate_of(link.read_back()["up"], "htb") == 40e9
        lab.transfer(SIZE)  # bytes cross intact
    with shaped(lab, LinkConfig.symmetric(rate="60mbit"), shaper="htb") as link:
        assert rate_of(link.read_back()["down"], "htb") == 60e6
        elapsed = lab.transfer(SIZE)
    assert_close(elapsed, SIZE * 8 / 60e6, rel=0.35, what="4 MB through htb at 60 mbit")


def test_reconfigure_changes_the_rate_in_place(lab):
    with shaped(lab, LinkConfig.symmetric(rate="20mbit")) as link:
        link.reconfigure({"up": {"rate": "80mbit"}})
        assert rate_of(link.read_back()["up"], "tbf") == 80e6
        assert rate_of(link.read_back()["down"], "tbf") == 20e6
        elapsed = lab.transfer(SIZE)
    assert_close(elapsed, SIZE * 8 / 80e6, rel=0.35, what="4 MB at the new rate")


def test_netem_delay_when_the_kernel_has_it(lab):
    probe = probe_netem()
    if not probe.ok:
        pytest.skip(probe.reason)
    with shaped(lab, LinkConfig.symmetric(delay="50ms")):
        elapsed = lab.transfer(1000)
    assert_at_least(elapsed, 0.05, what="one-way netem delay")


def test_missing_netem_is_refused_with_the_probes_reason(lab):
    probe = probe_netem()
    if probe.ok:
        pytest.skip("this kernel has sch_netem; nothing to refuse")
    link = shaped(lab, LinkConfig.symmetric(delay="20ms", rate="100mbit"))
    with pytest.raises(KernelUnsupported) as err:
        link.apply()
    assert err.value.reason == probe.reason and "userspace" in str(err.value)
    assert not [e for e in link.read_back()["up"] if e["kind"] == "tbf"]  # nothing half-applied


def test_tcp_buffers_are_raised_for_the_bdp_inside_the_namespace_only(lab):
    host_before = Path("/proc/sys/net/ipv4/tcp_rmem").read_text()
    report = raise_tcp_buffers(10e9, 0.2, lab.ns_a)  # BDP 250 MB -> 500 MB buffers
    inside = in_netns(lab.ns_a, lambda: Path("/proc/sys/net/ipv4/tcp_rmem").read_text())
    assert int(inside.split()[-1]) == 500_000_000
    assert report["net.ipv4.tcp_rmem"].endswith("500000000")
    assert Path("/proc/sys/net/ipv4/tcp_rmem").read_text() == host_before
