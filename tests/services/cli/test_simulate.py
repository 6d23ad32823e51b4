"""`pdd-emu simulate --faults N`: the campaign's file, its exit codes, and the replay line of a violation."""

from __future__ import annotations

import json
import shlex

import services.simulate.campaign as campaign_module
from services.simulate.run import SimulatedRun
from tests.services.cli.in_process import cli  # noqa: F401 - the fixture

ARGS = ("simulate", "--scenario", "pdd-mini", "--workload", "agentic:context=4K,output=16..64,think=200ms,turns=3",
        "--rate", "2", "--duration", "3s", "--no-progress")


def test_a_campaign_writes_each_run_and_exits_0(cli, tmp_path):
    code, out, err = cli(*ARGS, "--faults", "3", "--seed", "7", "--out", str(tmp_path))
    assert code == 0, err
    runs = [json.loads(line) for line in (tmp_path / "campaign.jsonl").read_text().splitlines()]
    assert [run["seed"] for run in runs] == [7, 8, 9]
    assert all(run["schedule"] and run["problems"] == [] for run in runs)
    assert "3 fault schedules, seeds 7..9" in out and "0 runs broke an invariant" in out


def test_a_violation_prints_its_seed_and_replay_command_and_exits_1(cli, tmp_path, monkeypatch):
    real = campaign_module.simulate_schedule

    def corrupting(campaign, seed, schedule) -> SimulatedRun:
        run = real(campaign, seed, schedule)
        if seed == 8:
            rid = next(r.id for r in run.records if r.ok)
            run.outputs[rid] = run.outputs[rid][:-1]
        return run

    monkeypatch.setattr(campaign_module, "simulate_schedule", corrupting)
    code, out, _ = cli(*ARGS, "--faults", "3", "--seed", "7", "--out", str(tmp_path))
    assert code == 1
    assert "violation at seed 8, faults [" in out and "1 runs broke an invariant" in out
    replay = next(line for line in out.splitlines() if "replay:" in line).split("replay: ")[1]
    words = shlex.split(replay)
    assert words[words.index("--seed") + 1] == "8" and words[words.index("--faults") + 1] == "1"
    assert words[words.index("--workload") + 1] == ARGS[4]
    code, out, _ = cli(*ARGS, "--faults", "3", "--seed", "7", "--out", str(tmp_path), "--json")
    summary = json.loads(out)
    assert code == 1 and summary["seeds"] == [7, 9] and [v["seed"] for v in summary["violations"]] == [8]
    assert summary["violations"][0]["replay"] == replay and summary["violations"][0]["problems"]


def test_bad_campaign_input_exits_2(cli, tmp_path):
    assert cli(*ARGS, "--faults", "0", "--out", str(tmp_path))[0] == 2
    code, _, err = cli(*ARGS, "--faults", "2", "--set", "request_timeout_s=soon", "--out", str(tmp_path))
    assert code == 2 and "request_timeout_s" in err
