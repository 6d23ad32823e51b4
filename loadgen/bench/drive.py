"""The three ways a run paces its requests: open loop, closed loop, and a trace's own timestamps.

In every mode a session's next turn is sent only after its previous answer has
arrived and its think time has passed; in the open loop, arrivals never wait
for completions: an arrival takes a session turn that is ready, else opens a
new session.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence

from loadgen.bench.dispatch import Dispatcher, RunClock
from loadgen.bench.records import RequestRecord
from loadgen.plan import RequestPlan, Session, Workload

# A closed-loop user's pause after a failed request, when its workload thinks for less: the OpenAI
# Python SDK's first retry delay (openai._constants.INITIAL_RETRY_DELAY, 0.5 s).
FAILURE_PAUSE_S = 0.5


async def drive_open_loop(
    workload: Workload, dispatcher: Dispatcher, clock: RunClock, arrivals: Iterator[float]
) -> None:
    ready: list[tuple[float, int, RequestPlan, Session]] = []  # (ready at, tie-break, next turn, session)
    order = itertools.count()
    exhausted = False

    def continue_session(plan: RequestPlan, session: Session, record: RequestRecord, output_ids: list[int]) -> None:
        if not record.ok:
            session.abandon()
            return
        follow = session.next_turn(plan.prompt, output_ids)
        if follow is not None:
            heapq.heappush(ready, (clock.now() + follow.think_s, next(order), follow, session))

    for offset in arrivals:
        if not await clock.sleep_until(offset):
            return
        if ready and ready[0][0] <= clock.now():
            _, _, plan, session = heapq.heappop(ready)
        else:
            fresh = None if exhausted else workload.new_session()
            if fresh is None:
                exhausted = True
                if not ready and not dispatcher.in_flight:
                    return
                dispatcher.skipped_arrivals += 1
                continue
            session, plan = fresh, fresh.first_request()
        dispatcher.launch(plan, session, continue_session)


async def drive_closed_loop(workload: Workload, dispatcher: Dispatcher, clock: RunClock, concurrency: int,
                            ramp_s: float = 0.0, starts: Sequence[float] | None = None,
                            on_send: Callable[[], None] | None = None,
                            send_at: Mapping[str, float] | None = None) -> None:
    """`concurrency` users; with `ramp_s`, user i joins at i x ramp_s / concurrency instead of all at once
    (a population that arrives at once sends every first turn, fresh and uncached, in one burst).

    `starts` gives each user's join time instead (a staircase of populations, services/experiments/steady.py),
    and `on_send` is called as each request leaves, answered or not. `send_at` (request id -> offset) sends
    each request it names at that offset instead of after its think time, or as soon as it is ready if
    that is later (its previous answer still out): a run paced by another run's sends, so that what one
    side's answers take longer does not carry into every later send (docs/simulate.md, "Paced by the
    simulation's sends").
    """
    if starts is not None and len(starts) != concurrency:
        raise ValueError(f"{len(starts)} join times for {concurrency} users")
    # Every user's first session is opened before anyone sends, so sessions s0..s(N-1) are the joining
    # ones and a session id names the same prompts however fast the answers come: opened as each user
    # joins, an early user's second session would take the id a later user's first one gets elsewhere.
    firsts: list[Session | None] = [workload.new_session(joining=True) for _ in range(concurrency)]

    async def user(index: int) -> None:
        session: Session | None = firsts[index]
        firsts[index] = None  # the user holds it; a finished session's history is freed with it
        plan: RequestPlan | None = None
        if session is None:
            return
        join_s = starts[index] if starts is not None else index * ramp_s / concurrency
        if join_s > 0 and not await clock.sleep_until(join_s):
            return
        while dispatcher.can_send():
            if plan is None:
                if session is None:
                    session = workload.new_session()
                    if session is None:
                        return
                plan = session.first_request()
                ready_s = clock.now()
            else:
                ready_s = clock.now() + plan.think_s
            if send_at is not None:
                ready_s = max(clock.now(), send_at.get(plan.request_id, ready_s))
            if ready_s > clock.now() and not await clock.sleep_until(ready_s):
                return
            if on_send is not None:
                on_send()
            outcome = await dispatcher.result(dispatcher.launch(plan, session, None))
            if outcome is None:
                return
            record, output_ids = outcome
            if record.ok:
                plan = session.next_turn(plan.prompt, output_ids)
                if plan is None:
                    session = None  # it ended: the user opens another
            else:
                # A failed turn ends the session, and the user pauses before its next one, as a client
                # backs off a failing server: a fresh session at once would hammer it (and, in virtual
                # time, where a refusal takes no time, spin without the clock ever moving on).
                session.abandon()
                session, plan = None, None
                if not await clock.sleep_until(clock.now() + pause):
                    return

    pause = pause_after_failure(workload)
    await asyncio.gather(*(user(i) for i in range(concurrency)))


def pause_after_failure(workload: Workload) -> float:
    """The workload's mean think time, at least FAILURE_PAUSE_S."""
    think = getattr(getattr(workload, "config", None), "think", None)
    return max(FAILURE_PAUSE_S, float(think or 0.0))


async def drive_trace_timing(workload: Workload, dispatcher: Dispatcher, clock: RunClock) -> None:
    while dispatcher.can_send():
        session = workload.new_session()
        if session is None:
            return
        plan = session.first_request()
        if not await clock.sleep_until(plan.at_s or 0.0):
            return
        dispatcher.launch(plan, session, None)
