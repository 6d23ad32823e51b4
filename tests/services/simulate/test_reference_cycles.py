"""A finished request leaves no state in reference cycles: reference counting frees its block hashes
and transfers at once, so a long simulation holds only live requests (docs/simulate.md "Speed")."""

from __future__ import annotations

import collections
import gc

import pytest

from services.scenario.loader import load_scenario
from services.simulate.run import run_simulation

# A KV `Transfer` can still be held by a cancelled wait's traceback; its own cycle is tested in tests/services/kv.
REQUEST_STATE = {"SequenceState", "SequenceHandle", "EventChannel", "RelayedRequest", "Job"}


@pytest.mark.parametrize("preset", ["pdd-mini", "pd-cross-mini"])
def test_a_finished_run_leaves_no_request_state_in_cycles(preset):
    scenario = load_scenario(preset)
    gc.collect()
    gc.disable()  # whatever is unreachable after the run was left to the cyclic collector
    try:
        run = run_simulation(scenario, "poisson:input=3000,output=200", rate=4.0, duration_s=4.0, seed=2)
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        cyclic = collections.Counter(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert len(run.records) > 5 and all(r.status == "ok" for r in run.records)
    assert any(r.pdd["pipeline"] == "P-RLD-MD" for r in run.records) or preset != "pdd-mini"
    left = {name: n for name, n in cyclic.items() if name in REQUEST_STATE}
    assert not left, f"request state freed only by the cyclic collector: {left}"
