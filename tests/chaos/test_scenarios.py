"""Every chaos scenario, quick, on a real mesh under load: the invariants of docs/reliability.md hold.

Each case starts its own mesh (pdd-mini or pd-cross-mini). With PDD_CHAOS_REPORTS=DIR set, each
report is also written there as JSON (docs/reliability.md's table is built from such reports).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.chaos import run_scenario
from services.chaos.hangs import hang_targets
from services.chaos.scenarios import SCENARIOS

pytestmark = pytest.mark.chaos

CASES = [(name, mode) for name, s in SCENARIOS.items() for mode in ("pdd", "pd-cross")
         if mode in (s.ci_modes or s.modes) and s.in_ci]


def _keep(report_json: str, name: str, mode: str) -> None:
    folder = os.environ.get("PDD_CHAOS_REPORTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / f"{name}-{mode}.json").write_text(report_json)


@pytest.mark.parametrize("name, mode", [c for c in CASES if c != ("slow-consumer", "pdd")],
                         ids=[f"{n}-{m}" for n, m in CASES if (n, m) != ("slow-consumer", "pdd")])
async def test_invariants_hold_under_the_fault(name, mode, tmp_path):
    report = await run_scenario(name, mode, quick=True, run_dir=tmp_path)
    _keep(report.to_json(), name, mode)
    print(report.to_text())
    assert report.ok, report.to_text()
    assert report.counts["sent"] == sum(report.counts[k] for k in ("completed", "failed", "lost", "corrupted",
                                                                      "abandoned"))
    assert report.counts["lost"] == 0 and report.counts["corrupted"] == 0
    assert report.recovery_s is not None and not report.leaks
    for phase in report.phases:
        # A relay holds a relayed request for a handoff's few tokens, and at this load it can sit idle for
        # the whole 30 s wait; a hang's bounds are on the requests sent during it (the probes, the TTFT P99,
        # the keeper's kill), so a relay hung while idle still tests them. A kill's point is the cut stream.
        if phase.name.startswith("kill-") or (phase.name.startswith("hang-") and phase.name != "hang-relay-decode"):
            assert phase.notes["mid_stream"], f"{phase.name} struck an idle process"
    if name == "hang":
        assert [p.name for p in report.phases] == [f"hang-{t}" for t in hang_targets(mode)]
        assert all(p.notes["hung_kills"] >= 1 and p.notes["new_pid"] != p.notes["old_pid"] for p in report.phases)
        if mode == "pdd":  # a path for every hang: each probe is served, and the hung roles' requests degraded
            assert all(kind == "completed" for p in report.phases for _, kind, _ in p.notes["probes"])
            served = set(report.during_faults)
            assert {"degraded: prefill-unreachable", "degraded: main-decode-down"} <= served, served
    if name == "rld-overload":
        assert report.during_faults.get("relay saturated", 0) + report.during_faults.get("429", 0) > 0
    if name == "wan-partition":
        assert [p.name for p in report.phases] == ["blackhole-5s", "reject-5s"]


def test_the_command_line_prints_the_outcome_counts_as_json(tmp_path):
    """The same checks through `pdd-emu chaos NAME --json`, as CI and a person run them."""
    cmd = [sys.executable, "-m", "services.cli", "chaos", "slow-consumer", "--mode", "pdd", "--quick", "--json",
           "--run-dir", str(tmp_path)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    _keep(done.stdout, "slow-consumer", "pdd")
    for key in ("sent", "completed", "failed", "lost", "recovery_s"):
        assert key in report
    assert report["lost"] == 0 and report["ok"]
    readers, hang_ups = report["by_tag"]["slow-reader"], report["by_tag"]["hang-up"]
    assert readers["completed"] == readers["sent"] > 0  # a slow reader still gets every token, in order
    assert hang_ups["abandoned"] + hang_ups["failed"] == hang_ups["sent"] > 0
