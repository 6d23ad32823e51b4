"""Parse the human units used in config and on the command line.

They live in netem, the bottom of the stack, so that link configs can read them
and every other package (services, loadgen) can import them without a cycle.

Inside the code, time is float seconds, sizes are int bytes and rates are float
bits per second; strings like "250us", "20gbit" or "64KiB" exist only at the
edges. Rates are decimal (1 mbit = 1e6 bit/s, as tc and network vendors count);
sizes accept both decimal (KB, MB, GB) and binary (KiB, MiB, GiB) prefixes.
"""

from __future__ import annotations

import math
import re

_NUMBER = r"(?P<value>[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(?P<unit>[A-Za-z%/]*)"

_TIME_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_RATE_UNITS = {
    "bit": 1.0, "bps": 1.0, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6,
    "gbit": 1e9, "gbps": 1e9, "tbit": 1e12, "tbps": 1e12,
    "b/s": 8.0, "kb/s": 8e3, "mb/s": 8e6, "gb/s": 8e9,
}
_SIZE_UNITS = {
    "": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40, "k": 2**10, "m": 2**20, "g": 2**30,
}


def _split(text: str | float | int, what: str) -> tuple[float, str]:
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return float(text), ""
    match = re.fullmatch(_NUMBER, str(text).strip())
    if match is None:
        raise ValueError(f"cannot read {what} {text!r}")
    return float(match["value"]), match["unit"]


def _scale(text: str | float | int, what: str, table: dict[str, float], default_unit: str) -> float:
    value, unit = _split(text, what)
    key = (unit or default_unit).lower() if what != "duration" else (unit or default_unit)
    if key not in table:
        raise ValueError(f"unknown {what} unit {unit!r} in {text!r}; use one of {', '.join(k for k in table if k)}")
    return value * table[key]


def parse_duration(text: str | float | int) -> float:
    """'20ms' -> 0.02 seconds. A bare number means seconds."""
    return _scale(text, "duration", _TIME_UNITS, "s")


def parse_rate(text: str | float | int) -> float:
    """'800mbit' -> 8e8 bits per second. A bare number means bits per second."""
    return _scale(text, "rate", _RATE_UNITS, "bit")


def parse_size(text: str | float | int) -> int:
    """'64MiB' -> 67108864 bytes. A bare number means bytes."""
    value = _scale(text, "size", _SIZE_UNITS, "b")
    if not math.isfinite(value):  # int() of it would raise OverflowError, which no caller expects
        raise ValueError(f"size {text!r} is not a finite number of bytes")
    return int(round(value))


def parse_fraction(text: str | float | int) -> float:
    """'0.1%' -> 0.001; a bare number is a fraction in [0, 1]."""
    value, unit = _split(text, "fraction")
    if unit == "%":
        value /= 100.0
    elif unit:
        raise ValueError(f"unknown fraction unit {unit!r} in {text!r}; use a plain fraction or a percentage")
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"fraction {text!r} is outside 0..1")
    return value
