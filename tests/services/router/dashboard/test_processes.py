"""The processes as the page shows them: the keepers' own status files, read by the dashboard's KeeperWatch."""

from __future__ import annotations

import signal
from pathlib import Path

from services.launcher.keeper import Keeper
from services.launcher.plan import build_plan
from services.router.dashboard.processes import KeeperWatch
from services.scenario import load_scenario


def _keeper(folder: Path, name: str) -> Keeper:
    keeper = Keeper(["true"], folder / f"{name}.json", max_restarts=2, backoff_s=0.1, max_backoff_s=1.0)
    keeper.write_status("running")
    return keeper


def test_a_restart_and_a_keeper_giving_up_are_events_and_the_table_has_every_process(tmp_path):
    plan = build_plan(load_scenario("pdd-mini")).model_copy(update={"status_dir": str(tmp_path)})
    prefill, link = _keeper(tmp_path, "prefill"), _keeper(tmp_path, "prefill-to-main-decode")
    watch = KeeperWatch(plan)
    rows, events = watch.poll()
    assert events == []
    assert {row["name"]: (row["state"], row["restarts"]) for row in rows} == {
        "router": (None, None), "prefill": ("running", 0), "relay-decode": (None, None),
        "main-decode": (None, None), "prefill-to-relay-decode": (None, None), "prefill-to-main-decode": ("running", 0)}
    prefill.restarts, prefill.last_exit_code = 1, -signal.SIGKILL
    prefill.write_status("running")
    link.last_exit_code = 2
    link.write_status("gave-up")
    _, events = watch.poll()
    assert events == ["prefill was killed by signal 9; its keeper restarted it (restart 1)",
                      "prefill-to-main-decode exited with status 2; its keeper gave up after 0 restarts"]
    assert watch.poll()[1] == []


def test_a_mesh_without_keepers_has_no_process_table():
    assert KeeperWatch(build_plan(load_scenario("pdd-mini"))).poll() == ([], [])
