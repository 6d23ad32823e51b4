import json
import subprocess
import sys
from pathlib import Path

import pytest

from loadgen.bench import BenchConfig
from loadgen.summary import SlaConfig, summarize
from loadgen.sweep import SweepConfig, max_goodput_rate, parse_rates, run_sweep

ROOT = Path(__file__).resolve().parents[2]


def summary_with(attainment: float):
    good = {"status": "ok", "ttft_s": 0.1, "tpot_s": 0.01}
    bad = {"status": "error", "ttft_s": None, "tpot_s": None}
    base = {"id": "x", "send_s": 0.0, "e2e_s": 1.0, "prompt_tokens": 1, "output_tokens": 1, "itl_s": [],
            "hit_rate": 0.0, "error": "e", "pdd": None}
    n_good = round(attainment * 10)
    records = [base | good] * n_good + [base | bad] * (10 - n_good)
    return summarize(records, sla=SlaConfig(), workload="w")


def test_max_goodput_rate_is_the_highest_rate_meeting_90_percent():
    summaries = {1.0: summary_with(1.0), 2.0: summary_with(0.9), 4.0: summary_with(0.8), 8.0: summary_with(0.95)}
    assert max_goodput_rate(summaries) == 8.0
    del summaries[8.0]
    assert max_goodput_rate(summaries) == 2.0
    assert max_goodput_rate({1.0: summary_with(0.5)}) is None


def test_rates_parse_and_refuse_nonsense():
    assert parse_rates("1, 2,4.5") == (1.0, 2.0, 4.5)
    with pytest.raises(ValueError):
        parse_rates("1,fast")
    with pytest.raises(ValueError):
        parse_rates("0,1")


async def test_sweep_runs_each_rate_and_writes_its_result(fake_router, tmp_path):
    bench = BenchConfig(url=fake_router.url, workload="poisson:input=32,output=4", rate=1, duration_s=0.5,
                        out_dir=tmp_path / "ignored", progress=False)
    result = await run_sweep(SweepConfig(bench=bench, rates=(4, 8), out_dir=tmp_path / "sweep"))
    assert list(result.summaries) == [4.0, 8.0]
    assert result.max_goodput_rate == 8.0
    saved = json.loads((tmp_path / "sweep" / "sweep.json").read_text())
    assert saved["max_goodput_rate"] == 8.0 and [r["rate"] for r in saved["rates"]] == [4.0, 8.0]
    assert (tmp_path / "sweep" / "rate-4" / "summary.json").is_file()
    assert (tmp_path / "sweep" / "report" / "goodput_vs_rate.png").is_file()
    assert not (tmp_path / "ignored").exists()


async def test_sweep_stops_after_the_first_rate_that_misses_the_sla(fake_router, tmp_path):
    bench = BenchConfig(url=fake_router.url, workload="poisson:input=32,output=4", rate=1, duration_s=0.5,
                        out_dir=tmp_path, progress=False, sla=SlaConfig(ttft_s=1e-6))
    result = await run_sweep(SweepConfig(bench=bench, rates=(8, 4, 16), out_dir=tmp_path / "sweep"))
    assert list(result.summaries) == [4.0]
    assert result.max_goodput_rate is None
    assert not (tmp_path / "sweep" / "rate-8").exists()


def test_sweep_cli_refuses_bad_rates(tmp_path):
    result = subprocess.run([sys.executable, "-m", "tests.loadgen.cli", "sweep", "--url", "http://x", "--workload",
                             "poisson", "--rates", "1,-2", "--duration", "1s", "--out", str(tmp_path)],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "must be positive" in result.stderr
