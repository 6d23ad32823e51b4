"""TCP buffer limits for a long fat pipe.

A single TCP flow can have at most one receive window in flight per round
trip, so its rate is capped at window / RTT. To fill a line of R bit/s over a
round trip of T seconds the socket buffers must hold the bandwidth-delay
product R x T / 8 bytes, and Linux needs about twice that because half the
buffer goes to bookkeeping (tcp_adv_win_scale). The defaults (tcp_rmem max
6 MiB on many distributions) cap a 100 ms path at about 0.5 Gbit/s; we raise
the maxima, never lower them (docs/netem.md, "Kernel backend").
"""

from __future__ import annotations

from pathlib import Path

from netem.kernel.ns import in_netns

HEADROOM = 2  # buffer bytes per byte of window (tcp_adv_win_scale)
KEYS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max", "net.core.wmem_max")


def bdp_bytes(rate_bps: float, rtt_s: float) -> int:
    return int(rate_bps * rtt_s / 8)


def wanted_max(rate_bps: float, rtt_s: float) -> int:
    return HEADROOM * bdp_bytes(rate_bps, rtt_s)


def _path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def planned(current: dict[str, str], want: int) -> dict[str, str]:
    """New values for the keys whose maximum is below `want`; the others are left alone."""
    changes = {}
    for key, text in current.items():
        values = [int(v) for v in text.split()]
        if values[-1] < want:
            values[-1] = want
            changes[key] = " ".join(str(v) for v in values)
    return changes


def raise_tcp_buffers(rate_bps: float, rtt_s: float, netns: str | None = None) -> dict[str, str]:
    """Raise the four limits to 2 x BDP where lower; returns {key: new value or 'skipped: why'}."""
    want = wanted_max(rate_bps, rtt_s)

    def work() -> dict[str, str]:
        current, report = {}, {}
        for key in KEYS:
            try:
                current[key] = _path(key).read_text()
            except OSError as err:
                report[key] = f"skipped: {err.strerror}"
        for key, value in planned(current, want).items():
            try:
                _path(key).write_text(value)
                report[key] = value
            except OSError as err:  # e.g. net.core.* is not per-namespace on older kernels
                report[key] = f"skipped: {err.strerror}"
        return report

    return in_netns(netns, work)
