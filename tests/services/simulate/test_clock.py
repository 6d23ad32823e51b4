"""The virtual loop: emulated hours in milliseconds of CPU, in order, exact, deterministic."""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from services.simulate.clock import DEFAULT_EPOCH_UNIX, RealClock, VirtualClock, VirtualEventLoop, run_virtual
from tests.tolerance import assert_at_most

HOUR = 3600.0


async def _sleepers(delays: list[float]) -> list[tuple[float, int]]:
    loop = asyncio.get_running_loop()
    woke: list[tuple[float, int]] = []

    async def sleeper(index: int, delay: float) -> None:
        await asyncio.sleep(delay)
        woke.append((loop.time(), index))

    await asyncio.gather(*(sleeper(i, d) for i, d in enumerate(delays)))
    return woke


def _schedule(seed: int, count: int = 2000) -> list[float]:
    rng = random.Random(seed)
    return [rng.uniform(0.0, 10 * HOUR) for _ in range(count)]


def test_emulated_hours_take_milliseconds_in_order_and_exact():
    delays = _schedule(1)
    started = time.process_time()
    woke = run_virtual(_sleepers(delays))
    cpu = time.process_time() - started
    assert_at_most(cpu, 1.0, "CPU seconds for 2000 sleeps over ten emulated hours")
    assert [t for t, _ in woke] == sorted(t for t, _ in woke)
    assert all(t == delays[i] for t, i in woke)  # loop.time() is the timer's own deadline, not near it


def test_timers_and_call_at_fire_in_deadline_order():
    async def main() -> list[str]:
        loop = asyncio.get_running_loop()
        fired: list[str] = []
        loop.call_at(7200.0, fired.append, "late")
        loop.call_later(5.0, fired.append, "early")
        handle = loop.call_later(60.0, fired.append, "cancelled")
        handle.cancel()
        await asyncio.sleep(HOUR * 3)
        return fired

    assert run_virtual(main()) == ["early", "late"]


def test_a_heap_of_mostly_cancelled_timers_is_swept_and_the_rest_fire_at_their_deadlines():
    async def main() -> list[tuple[float, int]]:
        loop = asyncio.get_running_loop()
        fired: list[tuple[float, int]] = []
        handles = [loop.call_at(10.0 + i, lambda i=i: fired.append((loop.time(), i))) for i in range(400)]
        for handle in handles[100:]:  # over half the heap cancelled, none at its head: the stock rule sweeps it all
            handle.cancel()
        await asyncio.sleep(0)
        assert len(loop._scheduled) == 100  # swept on the turn after the cancels
        await asyncio.sleep(1000.0)
        return fired

    assert run_virtual(main()) == [(10.0 + i, i) for i in range(100)]


def test_timers_due_at_the_same_instant_run_in_the_order_they_were_scheduled():
    async def main() -> list[int]:
        loop = asyncio.get_running_loop()
        rng, fired = random.Random(3), []
        for i in range(200):  # ties among other deadlines: the stock heap's order of ties follows its shape
            loop.call_at(1.0, fired.append, i)
            loop.call_at(rng.uniform(0.5, 1.5), lambda: None)
        await asyncio.sleep(2.0)
        return fired

    assert run_virtual(main()) == list(range(200))


def test_another_threads_callback_wakes_a_loop_with_no_timer():
    async def main() -> tuple[int, float]:
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(None, lambda: 42)  # no timer pending: the loop blocks on its selector
        return answer, loop.time()

    assert run_virtual(main(), start=5.0) == (42, 5.0)


def test_wait_for_deadlines_fire_in_virtual_time():
    async def main() -> tuple[float, bool]:
        loop = asyncio.get_running_loop()
        never = loop.create_future()
        try:
            await asyncio.wait_for(never, timeout=90 * 60.0)
        except TimeoutError:
            return loop.time(), True
        return loop.time(), False

    started = time.process_time()
    at, timed_out = run_virtual(main())
    assert timed_out and at == 90 * 60.0
    assert_at_most(time.process_time() - started, 1.0, "CPU seconds for a 90-minute wait_for")


def test_the_same_schedule_gives_identical_event_times():
    assert run_virtual(_sleepers(_schedule(7))) == run_virtual(_sleepers(_schedule(7)))


def test_a_task_chain_sees_time_only_move_forward():
    async def main() -> list[float]:
        loop = asyncio.get_running_loop()
        times: list[float] = []
        for step in range(500):
            await asyncio.sleep(0.001 * (step % 7))  # zero sleeps too: they must not move time
            times.append(loop.time())
        return times

    times = run_virtual(main())
    assert times == sorted(times)
    assert times[-1] == pytest.approx(sum(0.001 * (s % 7) for s in range(500)))


def test_virtual_clock_gives_unix_stamps_on_the_emulated_epoch():
    async def main() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualEventLoop)
        clock = VirtualClock(loop)
        before = clock.unix()
        await asyncio.sleep(HOUR)
        return before, clock.unix(), clock.now()

    before, after, now = run_virtual(main())
    assert before == DEFAULT_EPOCH_UNIX and after == DEFAULT_EPOCH_UNIX + HOUR and now == HOUR


async def test_real_clock_reads_the_running_loop_and_the_wall():
    clock = RealClock()
    assert clock.now() == pytest.approx(asyncio.get_running_loop().time(), abs=1.0)
    assert clock.unix() == pytest.approx(time.time(), abs=1.0)

