"""Steady open-loop traffic from a loadgen workload, judged request by request.

Arrivals are Poisson at `rate`; an arrival takes a session turn that is ready
(its previous answer arrived and its think time passed), else opens a new
session, as the bench client does (docs/loadgen.md §Arrivals). A failed turn
ends its session: the next turn needs the answer. Request ids carry the
traffic's tag, so two traffics of one run never share an id.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import random

from loadgen.plan import RequestPlan, Session
from loadgen.spec import parse_spec
from loadgen.workloads import build_workload
from services.chaos.client import Target, send_completion
from services.chaos.outcomes import Outcome

NON_STREAMED_EVERY = 8  # one request in eight asks for a whole body: both answer paths see the faults


class Traffic:
    def __init__(self, target: Target, workload_spec: str, rate: float, tag: str, seed: int, burst: int = 1) -> None:
        self.target, self.rate, self.tag, self.burst = target, rate, tag, burst
        rng = random.Random(seed)
        self.workload = build_workload(parse_spec(workload_spec), random.Random(rng.getrandbits(64)))
        self._gaps = random.Random(rng.getrandbits(64))
        self._ready: list[tuple[float, int, RequestPlan, Session]] = []
        self._order = itertools.count()
        self._tasks: set[asyncio.Task] = set()
        self.outcomes: list[Outcome] = []

    async def run(self, stop: asyncio.Event) -> None:
        """Send until `stop` is set; in-flight requests go on (see drain). May be called again to resume."""
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        while True:
            # Poisson arrivals (docs/loadgen.md §Arrivals) of `burst` requests at once, `rate` per second on average.
            next_at += self._gaps.expovariate(self.rate / self.burst)
            delay = next_at - loop.time()
            if delay > 0:
                try:
                    await asyncio.wait_for(stop.wait(), delay)
                except TimeoutError:
                    pass
            if stop.is_set():
                return
            for _ in range(self.burst):
                picked = self._next_plan()
                if picked is not None:
                    self._launch(*picked)

    def _next_plan(self) -> tuple[RequestPlan, Session] | None:
        if self._ready and self._ready[0][0] <= self.target.now():
            _, _, plan, session = heapq.heappop(self._ready)
            return plan, session
        session = self.workload.new_session()
        return None if session is None else (session.first_request(), session)

    def _launch(self, plan: RequestPlan, session: Session) -> None:
        count = len(self.outcomes)
        outcome = Outcome(f"{self.tag}-{plan.request_id}", self.tag, send_s=self.target.now())
        self.outcomes.append(outcome)
        stream = count % NON_STREAMED_EVERY != NON_STREAMED_EVERY - 1
        task = asyncio.create_task(self._exchange(outcome, plan, session, stream), name=outcome.request_id)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _exchange(self, outcome: Outcome, plan: RequestPlan, session: Session, stream: bool) -> None:
        await send_completion(self.target, outcome, plan.prompt, plan.max_tokens, stream)
        if outcome.kind != "completed":
            session.abandon()
            return
        follow = session.next_turn(plan.prompt, outcome.output_ids)
        outcome.output_ids = []  # kept only to build the next turn; runs are long
        if follow is not None:
            heapq.heappush(self._ready, (self.target.now() + follow.think_s, next(self._order), follow, session))

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    async def drain(self) -> None:
        """Wait for every request in flight; each one is bounded by the client deadline."""
        while self._tasks:
            await asyncio.wait(list(self._tasks))
