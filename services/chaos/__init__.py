"""Chaos scenarios: break links and kill services of a running mesh under load, and check the invariants.

    report = await run_scenario("wan-partition", "pdd", quick=True)
    print(report.to_text()); assert report.ok

`pdd-emu chaos NAME [--mode pdd|pd-cross] [--quick] [--json]` does the same
from the command line; docs/reliability.md lists the scenarios, the
invariants and the results.
"""

from services.chaos.runner import ChaosError, run_scenario
from services.chaos.scenarios import SCENARIOS

__all__ = ["SCENARIOS", "ChaosError", "run_scenario"]
