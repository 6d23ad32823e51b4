"""Load shapes for the Locust file: a staircase and periodic bursts, set by environment variables.

The locustfile exposes one of them only when PDD_LOAD_SHAPE names it, because
Locust uses any shape class it finds and then ignores -u and -r.
"""

from __future__ import annotations

import os

from locust import LoadTestShape


def _env_number(name: str, default: float) -> float:
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"environment variable {name}={text!r} is not a number") from None


class StepShape(LoadTestShape):
    """Add PDD_STEP_USERS users every PDD_STEP_SECONDS up to PDD_STEP_MAX; stop after PDD_SHAPE_SECONDS."""

    abstract = True  # concrete only when the locustfile selects it

    def tick(self):
        step_users = int(_env_number("PDD_STEP_USERS", 2))
        step_seconds = _env_number("PDD_STEP_SECONDS", 30)
        ceiling = int(_env_number("PDD_STEP_MAX", 16))
        elapsed = self.get_run_time()
        if elapsed > _env_number("PDD_SHAPE_SECONDS", 300):
            return None
        users = min(ceiling, step_users * (int(elapsed // step_seconds) + 1))
        return users, max(1.0, float(step_users))


class BurstShape(LoadTestShape):
    """PDD_BURST_BASE users, rising to PDD_BURST_PEAK for PDD_BURST_SECONDS every PDD_BURST_EVERY seconds."""

    abstract = True

    def tick(self):
        base = int(_env_number("PDD_BURST_BASE", 2))
        peak = int(_env_number("PDD_BURST_PEAK", 16))
        every = _env_number("PDD_BURST_EVERY", 60)
        length = _env_number("PDD_BURST_SECONDS", 10)
        elapsed = self.get_run_time()
        if elapsed > _env_number("PDD_SHAPE_SECONDS", 300):
            return None
        in_burst = (elapsed % every) >= every - length
        users = peak if in_burst else base
        return users, float(max(peak, 1))  # spawn the whole burst at once


SHAPES: dict[str, type[LoadTestShape]] = {"step": StepShape, "burst": BurstShape}


def selected_shape() -> type[LoadTestShape] | None:
    """The shape PDD_LOAD_SHAPE names (step or burst), made concrete; None when unset."""
    name = os.environ.get("PDD_LOAD_SHAPE", "").strip().lower()
    if not name:
        return None
    if name not in SHAPES:
        raise ValueError(f"PDD_LOAD_SHAPE={name!r} is not a load shape; use one of {', '.join(SHAPES)}")
    return type(SHAPES[name].__name__, (SHAPES[name],), {"abstract": False})
