"""The event-loop lag monitor: a periodic timer's lateness, in samples and in its histogram."""

from __future__ import annotations

import asyncio
import time

from prometheus_client import CollectorRegistry

from services.observability import LoopLagMonitor
from tests.tolerance import assert_at_least, assert_at_most
from tests.waiting import until


def test_a_blocked_loop_shows_as_lag_and_stop_ends_the_samples():
    async def main() -> tuple[list[float], int, float]:
        registry = CollectorRegistry()
        monitor = LoopLagMonitor(registry, interval_s=0.01)
        monitor.start()
        await until(lambda: len(monitor.samples) >= 2, "the lag monitor's first samples", 5.0, poll_s=0.001)
        time.sleep(0.08)  # the loop is held: the next tick fires about 70 ms late
        await until(lambda: len(monitor.samples) >= 3, "a sample after the held loop", 5.0, poll_s=0.001)
        await monitor.stop()
        taken = len(monitor.samples)
        await asyncio.sleep(0.05)
        return list(monitor.samples), taken, registry.get_sample_value("pdd_event_loop_lag_seconds_count")

    samples, taken, count = asyncio.run(main())
    assert_at_least(max(samples), 0.05, what="lag of the tick after an 80 ms block")
    assert_at_most(min(samples), 0.05, what="lag of a tick on a free loop")
    assert len(samples) == taken == count  # nothing after stop, every sample in the histogram
