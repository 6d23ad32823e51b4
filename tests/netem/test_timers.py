"""Timers for the delay line: the timerfd path and the loop fallback, on a real loop."""

import asyncio

from netem.timers import LoopTimers, PreciseTimers
from tests.tolerance import assert_close

WAIT_S = 5.0


async def fire_times(timers, offsets: list[float]) -> list[tuple[float, float]]:
    loop = asyncio.get_running_loop()
    start = loop.time()
    done: list[tuple[float, float]] = []
    finished = loop.create_future()

    def hit(when: float) -> None:
        done.append((when, loop.time()))
        if len(done) == len(offsets) and not finished.done():
            finished.set_result(None)

    for off in offsets:
        timers.call_at(start + off, lambda w=start + off: hit(w))
    await asyncio.wait_for(finished, WAIT_S)
    return done


async def test_precise_timers_fire_in_deadline_order_near_their_deadlines():
    timers = PreciseTimers(asyncio.get_running_loop())
    try:
        offsets = [0.030, 0.010, 0.020, 0.0105, 0.040]
        done = await fire_times(timers, offsets)
        assert [w for w, _ in done] == sorted(w for w, _ in done)
        for when, at in done:
            assert_close(at, when, rel=0.0, abs_=0.005, what="timer firing time")
    finally:
        timers.close()


async def test_cancelled_timers_do_not_fire():
    loop = asyncio.get_running_loop()
    for timers in (PreciseTimers(loop), LoopTimers(loop)):
        fired = []
        handle = timers.call_at(loop.time() + 0.005, lambda: fired.append("cancelled"))
        handle.cancel()
        await fire_times(timers, [0.01])
        assert fired == []
        timers.close()


async def test_loop_timers_fall_back_with_a_centring_lead():
    timers = LoopTimers(asyncio.get_running_loop())
    assert timers.lead == timers.margin == 0.0005
    done = await fire_times(timers, [0.01, 0.02])
    for when, at in done:
        assert_close(at, when, rel=0.0, abs_=0.005, what="fallback timer firing time")
