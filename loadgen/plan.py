"""What a workload hands the clients: request plans, grouped in sessions.

Every workload is a source of sessions. A session yields its first request at
once and each later turn only from the output actually received for the turn
before, because outputs are deterministic functions of the prompt that only
the server computes. Trace and synthetic requests are one-turn sessions.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

import numpy as np

OutputFunction = Callable[[list[int], int], list[int]]  # (prompt ids, max_tokens) -> output ids
ArrivalShape = Literal["poisson", "gamma"]


@dataclass(frozen=True)
class RequestPlan:
    """One request to send. `hit_rate` is measured from token-id overlap with what came before."""

    request_id: str
    prompt: list[int] = field(repr=False)
    max_tokens: int
    session: str | None = None
    turn: int = 0
    hit_rate: float = 0.0
    target_hit_rate: float | None = None
    think_s: float = 0.0  # pause after the previous turn's answer before sending this one
    at_s: float | None = None  # send time from the start, for workloads with their own timing
    # The prompt as an int64 array, where the workload built one anyway: a simulated client hands it to the
    # router as a decoded body would, saving the list's conversion (a millisecond for 64K ids).
    prompt_array: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)


class Session(Protocol):
    session_id: str

    def first_request(self) -> RequestPlan: ...

    def next_turn(self, previous_prompt: list[int], received_output_ids: list[int]) -> RequestPlan | None:
        """The following turn built from the output received, or None when the session is over."""
        ...

    def abandon(self) -> None:
        """The previous turn failed: the session cannot continue without its output."""
        ...


class SingleRequest:
    """A session of one turn: trace and synthetic requests stand alone."""

    def __init__(self, plan: RequestPlan) -> None:
        self.session_id = plan.request_id
        self._plan = plan

    def first_request(self) -> RequestPlan:
        return self._plan

    def next_turn(self, previous_prompt: list[int], received_output_ids: list[int]) -> None:
        return None

    def abandon(self) -> None:
        pass


class Workload(Protocol):
    name: str
    own_timing: bool  # requests carry `at_s` (trace replay); otherwise an arrival process paces them
    arrival_shape: ArrivalShape
    arrival_cv: float  # coefficient of variation of inter-arrival gaps (1 for Poisson)
    default_rate: float | None  # requests per second when the client is given no rate

    def new_session(self, joining: bool = False) -> Session | None:
        """A new session, or None when the workload has no more. `joining`: a closed-loop user's first,
        which a multi-turn workload may cut to the rest of a session in progress."""
        ...

    def hit_distribution(self) -> object:
        """The HitDistribution of every request planned so far."""
        ...


def plan_offline(
    workload: Workload, output_fn: OutputFunction, max_requests: int, concurrent: int = 1
) -> list[RequestPlan]:
    """Plan requests without a server: `output_fn` stands in for the model's answers.

    Up to `concurrent` sessions are interleaved round-robin, as if they ran side by side.
    """
    plans: list[RequestPlan] = []
    active: list[tuple[Session, RequestPlan]] = []
    exhausted = False
    while len(plans) < max_requests:
        while not exhausted and len(active) < concurrent:
            session = workload.new_session()
            if session is None:
                exhausted = True
            else:
                active.append((session, session.first_request()))
        if not active:
            break
        session, plan = active.pop(0)
        plans.append(plan)
        follow = session.next_turn(plan.prompt, output_fn(plan.prompt, plan.max_tokens))
        if follow is not None:
            active.append((session, follow))
    return plans
