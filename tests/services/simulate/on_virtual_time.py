"""Run a test's coroutine as a simulation runs: on a virtual loop, with the process's clocks reading its time."""

from __future__ import annotations

from services.simulate.clock import VirtualClock, process_clocks, virtual_runner


def on_virtual_time(main):
    """`main()` (a coroutine function) to completion on a fresh virtual loop; its result."""
    with virtual_runner() as runner:
        with process_clocks(VirtualClock(runner.get_loop())):
            return runner.run(main())
