"""The human units of config and command line: parsed by netem/units.py, the bottom of the stack.

Inside the code, time is float seconds, sizes are int bytes and rates are float
bits per second; strings like "250us", "20gbit" or "64KiB" exist only at the edges.
"""

from __future__ import annotations

from netem.units import parse_duration, parse_fraction, parse_rate, parse_size

__all__ = ["format_rate", "parse_duration", "parse_fraction", "parse_rate", "parse_size"]


def format_rate(bits_per_second: float) -> str:
    for unit, scale in (("gbit", 1e9), ("mbit", 1e6), ("kbit", 1e3)):
        if bits_per_second >= scale:
            return f"{bits_per_second / scale:g}{unit}"
    return f"{bits_per_second:g}bit"
