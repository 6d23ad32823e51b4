"""`pdd-emu experiment economics` as a user runs it: the quick run in the simulator and in the mesh."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from services.experiments.economics.figures import bcr_gain_from
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour
from tests.experiments.cli import quick_headline
from tests.raycluster import RAY_DEADLINE_S, ray_cluster  # noqa: F401 (a fixture)
from tests.tolerance import assert_at_least, assert_at_most

SAMPLE = "loadgen/samples/mooncake-sample.jsonl"
KEYS = {"ttft_p99_reduction", "goodput_gain", "bcr_gain", "cost_reduction", "rld_token_share", "singular_share"}


def _experiment(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "services.cli", "experiment", *args, "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)


def test_the_mesh_backend_runs_only_the_mini_scale(tmp_path):
    proc = _experiment(tmp_path, "economics", "--backend", "mesh", "--json")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "mini presets only" in proc.stderr and "--quick" in proc.stderr
    proc = _experiment(tmp_path, "wan", "--quick", "--backend", "simulate")
    assert proc.returncode == 2 and "--backend applies to economics only" in proc.stderr


REFUSED = [  # (arguments, what the one-line error says): each exits 2 before running anything
    (("economics", "--quick", "--seeds", "0"), "--seeds must be at least 1"),
    (("wan", "--quick", "--seeds", "3"), "--seeds applies to economics only"),
    (("economics", "--quick", "--workers", "0"), "--workers must be at least 1"),
    (("economics", "--quick", "--backend", "mesh", "--workers", "2"), "drop --workers"),
    (("wan", "--quick", "--workers", "2"), "--workers applies to economics only"),
    (("economics", "--quick", "--workers", "2", "--ray-address", "127.0.0.1:1"), "--workers sizes a local Ray"),
    (("economics", "--quick", "--backend", "mesh", "--ray-address", "127.0.0.1:1"), "drop --ray-address"),
    (("bathtub", "--quick", "--ray-address", "127.0.0.1:1"), "--ray-address applies to economics only"),
    (("economics", "--quick", "--warmup-s", "0"), "--warmup-s must be a positive number"),
    (("economics", "--quick", "--backend", "mesh", "--measure-s", "-1"), "--measure-s must be a positive number"),
    (("paper", "--quick", "--measure-s", "60"), "--measure-s applies to economics only"),
    (("handoff", "--quick", "--warmup-s", "60"), "--warmup-s applies to economics only"),
    (("economics", "--quick", "--paced"), "add --backend mesh"),
    (("wan", "--quick", "--paced"), "--paced applies to economics only"),
]


@pytest.mark.parametrize("args, message", REFUSED, ids=[" ".join(args) for args, _ in REFUSED])
def test_an_option_it_cannot_take_is_refused_in_one_line(tmp_path, args, message):
    proc = _experiment(tmp_path, *args)
    assert proc.returncode == 2 and message in proc.stderr and proc.stdout == ""


@pytest.mark.slow
def test_the_quick_run_on_a_ray_cluster_gives_the_figures_it_gives_here(tmp_path, ray_cluster):
    address, env, ray = ray_cluster
    proc = subprocess.run([sys.executable, "-m", "services.cli", "experiment", "economics", "--quick", "--json",
                           "--ray-address", address, "--out", str(tmp_path / "cluster")],
                          capture_output=True, text=True, env=env, timeout=RAY_DEADLINE_S)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "the Ray cluster at " + address in proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == quick_headline("economics", tmp_path / "here")


def test_deployments_only_trims_the_full_run_of_economics_only(tmp_path):
    proc = _experiment(tmp_path, "economics", "--quick", "--deployments-only")
    assert proc.returncode == 2 and "--quick already searches the deployments only" in proc.stderr
    proc = _experiment(tmp_path, "paper", "--quick", "--deployments-only")
    assert proc.returncode == 2 and "--deployments-only applies to economics only" in proc.stderr


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.parametrize("backend, windows",
                         [("simulate", ()), ("mesh", ("--warmup-s", "8", "--measure-s", "12", "--paced"))])
def test_quick_run_prints_consistent_headline_figures(tmp_path, backend, windows):
    # the mesh's points run in real time, one fresh mesh each: short windows keep its six points to about two
    # minutes; paced, each point is simulated first and its mesh requests sent at the simulation's send times
    headline = quick_headline("economics", tmp_path, "--backend", backend, *windows)
    assert set(headline) == KEYS
    expected = 1 - cost_per_hour(load_scenario("pdd-mini")) / cost_per_hour(load_scenario("pd-intra-mini"))
    assert headline["cost_reduction"] == pytest.approx(expected)
    assert headline["bcr_gain"] == pytest.approx(bcr_gain_from(headline["goodput_gain"], headline["cost_reduction"]))
    assert 0 <= headline["rld_token_share"] < 0.5 and 0 <= headline["singular_share"] < 0.5
    assert headline["ttft_p99_reduction"] < 1
    result = json.loads((tmp_path / "economics" / "result.json").read_text())
    assert result["backend"] == backend and result["identity_gap"] == pytest.approx(0.0, abs=1e-9)
    if windows:
        assert result["point_settings"] == {"warmup_s": 8.0, "measure_s": 12.0, "paced": True}
        _assert_paced(tmp_path / "economics" / "runs", warmup_s=8.0)
    for key in ("pd-intra", "pd-cross", "pdd"):
        deployment = result["deployments"][key]
        assert deployment["method"] == "grid" and len(deployment["points"]) >= 1
        assert any(line.startswith("prefill busy: ") for line in deployment["checks"])
    assert (tmp_path / "economics" / "goodput.png").stat().st_size > 0


def test_the_workload_must_be_a_trace_that_exists_and_simulated(tmp_path):
    proc = _experiment(tmp_path, "economics", "--quick", "--workload", "poisson")
    assert proc.returncode == 2 and "Mooncake trace" in proc.stderr
    proc = _experiment(tmp_path, "economics", "--quick", "--workload", "mooncake:no-such-trace.jsonl")
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = _experiment(tmp_path, "economics", "--quick", "--backend", "mesh", "--workload", f"mooncake:{SAMPLE}")
    assert proc.returncode == 2 and "replays a trace in the simulator" in proc.stderr
    proc = _experiment(tmp_path, "wan", "--quick", "--workload", f"mooncake:{SAMPLE}")
    assert proc.returncode == 2 and "--workload applies to economics only" in proc.stderr


@pytest.mark.slow
def test_a_trace_runs_at_replay_speeds(tmp_path):
    headline = quick_headline("economics", tmp_path, "--workload", f"mooncake:{SAMPLE}")
    assert set(headline) == KEYS
    result = json.loads((tmp_path / "economics" / "result.json").read_text())
    assert result["workload"] == f"mooncake:{SAMPLE}"
    for key in ("pd-intra", "pd-cross", "pdd"):
        assert [p["load"] for p in result["deployments"][key]["points"]] == [0.25, 0.5]
    assert len(list((tmp_path / "economics" / "runs").glob("pdd-mini-*-seed0/speed-0.5/summary.json"))) == 1


@pytest.mark.slow
def test_a_resumed_run_runs_no_point_again(tmp_path):
    first = quick_headline("economics", tmp_path, "--workload", f"mooncake:{SAMPLE}")
    again = quick_headline("economics", tmp_path, "--workload", f"mooncake:{SAMPLE}", "--resume")
    assert again == first
    points = json.loads((tmp_path / "economics" / "result.json").read_text())["points"]
    assert points == {"run": 0, "reused": 6, "loaded": 6}
    proc = _experiment(tmp_path, "economics", "--quick", "--backend", "mesh", "--resume")
    assert proc.returncode == 2 and "--resume reuses simulated points" in proc.stderr


def _assert_paced(runs: Path, warmup_s: float) -> None:
    """Every paced mesh point sent each request no earlier than its simulation did, most of them then. The
    simulated sends count from the run's start, the window's records from the window's, `warmup_s` later."""
    points = sorted(runs.glob("*/users-*/simulated-sends.json"))
    assert len(points) == 6  # three deployments, two loads
    for sends in points:
        simulated = json.loads(sends.read_text())
        mesh = {r["id"]: r["send_s"] + warmup_s for r in map(json.loads, (sends.parent / "requests.jsonl").open())}
        both = simulated.keys() & mesh.keys()
        assert len(both) >= len(mesh) // 2 > 0
        lags = sorted(mesh[rid] - simulated[rid] for rid in both)
        assert_at_least(lags[0], -1e-6, what=f"{sends.parent.name}: a mesh send before the simulation's")
        assert_at_most(lags[len(lags) // 2], 0.1, what=f"{sends.parent.name}: the median send's lag")
