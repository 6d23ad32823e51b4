"""A staircase of agent populations: how many sessions run at once, and when each one starts.

Agentic traffic is closed-loop: an agent sends its next turn when the previous
answer has arrived and its think time has passed, so a slower deployment gets
fewer requests, not more sessions (docs/experiments.md §Steady state). A step adds
agents, started evenly over its ramp so their first turns (always cache
misses) do not arrive as one burst, holds the population for `settle_s`, then
measures for `measure_s`: requests sent in that window are its sample.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """Grow to `users` agents over `ramp_s`, hold for `settle_s`, then measure for `measure_s` (emulated seconds)."""

    users: int
    ramp_s: float
    settle_s: float
    measure_s: float

    def __post_init__(self) -> None:
        if self.users < 1 or min(self.ramp_s, self.settle_s) < 0 or self.measure_s <= 0:
            raise ValueError(f"a step needs at least one agent, a positive window, non-negative ramp and settle: {self}")


@dataclass(frozen=True)
class Window:
    users: int | None  # agents; None: an open-loop load (a trace replayed at its own pace)
    start_s: float
    end_s: float

    @property
    def seconds(self) -> float:
        return self.end_s - self.start_s


@dataclass(frozen=True)
class Population:
    starts: tuple[float, ...]  # one start time per agent, in order
    windows: tuple[Window, ...]
    end_s: float


def staircase(steps: tuple[Step, ...] | list[Step]) -> Population:
    """Start times of every agent and the measured windows; populations must not shrink."""
    if not steps:
        raise ValueError("a staircase needs at least one step")
    starts: list[float] = []
    windows: list[Window] = []
    now, users = 0.0, 0
    for step in steps:
        added = step.users - users
        if added < 0:
            raise ValueError(f"populations only grow: {users} agents, then {step.users}")
        # evenly over the ramp, the first at its start (a zero ramp starts them together)
        starts += [now + step.ramp_s * i / added for i in range(added)]
        now += step.ramp_s + step.settle_s
        windows.append(Window(step.users, now, now + step.measure_s))
        now += step.measure_s
        users = step.users
    return Population(tuple(starts), tuple(windows), now)
