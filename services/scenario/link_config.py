"""A planned link's emulated spec -> the real netem config that shapes it (docs/mesh.md §Byte scale).

KV links carry emulated bytes / byte_scale, so their rate and queue are divided by
the same factor and a transfer still takes `delay + emulated bytes / emulated rate`.
Control links carry gRPC at its real size and keep the emulated rate and queue.
Every place that configures a link at start or patches it at run time goes through
`real_fields`, so the conversion and its queue floor are written once.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from netem.config import LinkConfig
from netem.units import parse_rate, parse_size
from services.scenario.model import LinkSpec
from services.scenario.plan import LinkPlan

# An assumption, not a fit: the smallest queue a scaled link keeps. A 64 MiB queue over a large
# byte_scale falls to a few KB, where the link would pause its reads every segment or two (it
# stops reading at the bound and sets SO_RCVBUF to half of it, or to a few TCP segments if more,
# docs/netem.md §Serialization and backpressure). 64 KiB is TCP's largest window without window
# scaling (RFC 7323), so one unscaled window always fits.
MIN_QUEUE_BYTES = 64 * 2**10
_UNLIMITED = (None, "", "none", "unlimited")


def byte_divisor(link: LinkPlan, byte_scale: float) -> float:
    """What a link's rate and queue are divided by: byte_scale for KV bytes, 1 for control traffic."""
    return byte_scale if link.purpose == "kv" else 1.0


def real_fields(link: LinkPlan, emulated: Mapping[str, Any], byte_scale: float) -> dict[str, Any]:
    """netem config fields in emulated units (numbers or unit strings) -> the same fields in real units.

    Only `rate`, `queue` and `window` scale (a window of emulated bytes over the same round trip keeps
    the per-connection rate it caps); every other field (delay, jitter, loss, ...) passes as given.
    """
    divisor = byte_divisor(link, byte_scale)
    real = dict(emulated)
    if "rate" in emulated:
        rate = emulated["rate"]
        real["rate"] = None if rate in _UNLIMITED else parse_rate(rate) / divisor
    if "queue" in emulated:
        real["queue"] = max(MIN_QUEUE_BYTES, int(parse_size(emulated["queue"]) / divisor))
    if "window" in emulated:
        window = emulated["window"]
        real["window"] = None if window in _UNLIMITED else max(1, int(parse_size(window) / divisor))
    return real


def spec_fields(spec: LinkSpec) -> dict[str, Any]:
    """A scenario's link spec in netem's field names, still in emulated units."""
    return {"delay": spec.delay_s, "jitter": spec.jitter_s, "jitter_dist": spec.jitter_dist, "loss": spec.loss,
            "rate": spec.rate_bps, "queue": spec.queue_bytes, "window": spec.window_bytes}


def real_link_config(link: LinkPlan, byte_scale: float) -> LinkConfig:
    """The netem config of a planned link, in real units, the same both ways."""
    return LinkConfig.symmetric(**real_fields(link, spec_fields(link.spec), byte_scale))
