"""Kernel qdiscs for one direction (an interface's egress), planned then applied with pyroute2.

The plan is a pure function of the config, so it is unit-tested without a
kernel (docs/netem.md, "Kernel backend"):

- netem at the root for delay, jitter, correlation, loss, duplicate and reorder,
  its packet limit sized from rate x (delay + 4 sigma) so a full BDP fits;
- under it (or at the root when no netem is needed) the rate shaper: tbf up to
  34.36 Gbit/s, htb above, because the rate field pyroute2 fills for tbf is a
  32-bit count of bytes per second while htb carries a 64-bit rate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from netem.config import DirectionConfig
from netem.units import parse_fraction

TBF_MAX_BPS = (2**32 - 1) * 8  # 34.36 Gbit/s
MTU_BYTES = 1514
ASSUMED_LINE_BPS = 10e9  # sizes netem's limit when no rate is configured
MIN_NETEM_LIMIT = 1000  # netem's own default, packets
TBF_LATENCY_S = 0.05  # how long a packet may wait in tbf before it is dropped
Shaper = Literal["auto", "tbf", "htb"]
BURST_SECONDS = 0.004  # tbf/htb bucket: 4 ms of line time, at least a jumbo of MTUs


class NetemExtras(BaseModel):
    """Packet-level impairments only the kernel backend has (a byte stream cannot duplicate)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    duplicate: float = Field(0.0, ge=0, le=1)
    reorder: float = Field(0.0, ge=0, le=1, description="share of packets sent at once, out of order")
    reorder_correlation: float = Field(0.0, ge=0, le=1)

    @field_validator("duplicate", "reorder", "reorder_correlation", mode="before")
    @classmethod
    def _fraction(cls, value: Any) -> float:
        return parse_fraction(value)


class KernelUnsupported(RuntimeError):
    """The kernel backend cannot do what was asked here; the message says why and what to use."""

    def __init__(self, reason: str, advice: str = "use the userspace backend (--backend userspace)") -> None:
        super().__init__(f"{reason}; {advice}")
        self.reason = reason


@dataclass(frozen=True)
class QdiscStep:
    kind: str
    handle: str
    parent: str | None  # None: the root
    params: dict[str, Any] = field(default_factory=dict)
    class_params: dict[str, Any] | None = None  # htb's one class, handle <major>:1


def needs_netem(config: DirectionConfig, extras: NetemExtras) -> bool:
    return bool(config.delay_s or config.jitter_s or config.loss or extras.duplicate or extras.reorder)


def netem_limit_packets(config: DirectionConfig) -> int:
    """Packets netem must hold to keep the line busy: 2 x rate x (delay + 4 sigma) / MTU."""
    rate = config.rate_bps or ASSUMED_LINE_BPS
    bdp_bytes = rate / 8 * (config.delay_s + 4 * config.jitter_s)
    return max(MIN_NETEM_LIMIT, math.ceil(2 * bdp_bytes / MTU_BYTES))


def _burst_bytes(rate_bps: float) -> int:
    return max(10 * MTU_BYTES, int(rate_bps / 8 * BURST_SECONDS))


def _percent(fraction: float) -> float:
    return fraction * 100.0


def plan(config: DirectionConfig, extras: NetemExtras | None = None, shaper: Shaper = "auto") -> list[QdiscStep]:
    """The qdiscs, root first, that give an interface's egress this config.

    `shaper` picks the rate qdisc: auto (tbf up to TBF_MAX_BPS, htb above), or tbf or htb.
    """
    extras = extras or NetemExtras()
    steps: list[QdiscStep] = []
    if needs_netem(config, extras):
        if config.jitter_s and config.jitter_dist != "uniform":
            raise KernelUnsupported(
                f"netem jitter distribution {config.jitter_dist!r} needs a distribution table, which pyroute2 "
                "cannot load", "use jitter_dist uniform or the userspace backend"
            )
        netem: dict[str, Any] = {
            "delay": round(config.delay_s * 1e6),  # microseconds
            "jitter": round(config.jitter_s * 1e6),
            "loss": _percent(config.loss),
            "limit": netem_limit_packets(config),
        }
        if config.jitter_s and config.correlation:
            netem["delay_corr"] = _percent(config.correlation)
        if extras.duplicate:
            netem["duplicate"] = _percent(extras.duplicate)
        if extras.reorder:
            netem["prob_reorder"] = _percent(extras.reorder)
            netem["corr_reorder"] = _percent(extras.reorder_correlation)
        steps.append(QdiscStep("netem", "1:", None, netem))
    if config.rate_bps is not None:
        parent = "1:1" if steps else None
        handle = "10:" if steps else "1:"
        rate_bytes = int(config.rate_bps / 8)
        burst = _burst_bytes(config.rate_bps)
        if shaper == "tbf" and config.rate_bps > TBF_MAX_BPS:
            raise KernelUnsupported(f"tbf cannot shape above {TBF_MAX_BPS / 1e9:.2f} Gbit/s", "use shaper htb or auto")
        if shaper == "tbf" or (shaper == "auto" and config.rate_bps <= TBF_MAX_BPS):
            limit = int(rate_bytes * TBF_LATENCY_S) + burst
            steps.append(QdiscStep("tbf", handle, parent, {"rate": rate_bytes, "burst": burst, "limit": limit}))
        else:
            major = handle.rstrip(":")
            steps.append(QdiscStep(
                "htb", handle, parent, {"default": 1},
                class_params={"handle": f"{major}:1", "rate": f"{int(config.rate_bps)}bit", "burst": burst, "cburst": burst},
            ))
    return steps
