"""Bench runs against the test double, then the report: table, PNGs that show something, HTML."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib import image

from loadgen.bench import BenchConfig, run_bench
from loadgen.report import build_report
from loadgen.summary import SlaConfig
from tests.loadgen.browser import chromium, inspect_page
from tests.tolerance import assert_at_least

ROOT = Path(__file__).resolve().parents[2]
PLOTS = ("ttft_cdf.png", "goodput_vs_rate.png", "hit_rate_bins.png", "wan_throughput.png", "request_timeline.png")


def assert_real_picture(path: Path) -> None:
    assert_at_least(path.stat().st_size, 5 * 1024, what=f"size of {path.name}")
    pixels = image.imread(path)[..., :3]
    assert pixels.std() > 0.05, f"{path.name} is (nearly) a single colour"
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 20, f"{path.name} has almost no colours"


async def two_rates(router, tmp_path, **settings) -> list[Path]:
    dirs = []
    for rate in (10, 30):
        out = tmp_path / f"rate-{rate}"
        await run_bench(BenchConfig(url=router.url, workload="agentic:context=4K,output=8..24,think=10ms,turns=8",
                                    rate=rate, duration_s=1.0, out_dir=out, progress=False, **settings))
        dirs.append(out)
    return dirs


async def test_bench_then_report_makes_every_plot_and_page(fake_router, tmp_path):
    dirs = await two_rates(fake_router, tmp_path, cost_per_hour=12.5)
    report = build_report(dirs, tmp_path / "report")
    for name in PLOTS:
        assert_real_picture(tmp_path / "report" / name)
    assert set(p.name for p in report.images.values()) == set(PLOTS)
    page = (tmp_path / "report" / "index.html").read_text()
    for name in PLOTS:
        assert f"src='{name}'" in page
    assert "../rate-10/summary.json" in page
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "| pdd @ 10 req/s | 10 |" in markdown and "| pdd @ 30 req/s | 30 |" in markdown
    assert "BCR" in markdown and "12.50" in markdown
    assert "RLD share" in markdown and "WAN GB" in markdown


async def test_report_recomputes_goodput_under_another_sla(fake_router, tmp_path):
    dirs = await two_rates(fake_router, tmp_path)
    lenient = build_report(dirs, tmp_path / "lenient")
    strict = build_report(dirs, tmp_path / "strict", SlaConfig(ttft_s=1e-6, tpot_s=1.0))
    assert all(run.summary.sla_attainment == 1.0 for run in lenient.runs)
    assert all(run.summary.sla_attainment == 0.0 and run.summary.goodput_rps == 0.0 for run in strict.runs)
    assert "BCR" not in lenient.markdown  # no cost given


async def test_report_cli_prints_the_table(fake_router, tmp_path):
    dirs = await two_rates(fake_router, tmp_path)
    result = subprocess.run([sys.executable, "-m", "tests.loadgen.cli", "report", *map(str, dirs), "--out",
                             str(tmp_path / "out"), "--sla-ttft", "1us"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "TTFT P99 s" in result.stdout and "0.0%" in result.stdout
    assert (tmp_path / "out" / "index.html").is_file()


def test_report_of_a_folder_that_is_not_a_run_exits_2(tmp_path):
    result = subprocess.run([sys.executable, "-m", "tests.loadgen.cli", "report", str(tmp_path), "--out",
                             str(tmp_path / "out")], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "is not a bench output" in result.stderr


def test_single_run_without_server_stats_still_reports(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    record = {"id": "q0", "session": None, "turn": 0, "send_s": 0.0, "send_unix": 0.0, "prompt_tokens": 10,
              "max_tokens": 3, "hit_rate": 0.0, "target_hit_rate": None, "status": "ok", "error": None,
              "http_status": 200, "output_tokens": 3, "ttft_s": 0.1, "tpot_s": 0.01, "e2e_s": 0.12,
              "itl_s": [0.01, 0.01], "finish_reason": "length", "usage": None, "pdd": None}
    (run / "requests.jsonl").write_text(json.dumps(record) + "\n")
    from loadgen.summary import summarize

    (run / "summary.json").write_text(summarize([record], sla=SlaConfig(), workload="poisson").model_dump_json())
    report = build_report([run], tmp_path / "out")
    assert "goodput_vs_rate.png" not in {p.name for p in report.images.values()}  # one rate only
    assert (tmp_path / "out" / "wan_throughput.png").is_file()


@pytest.mark.parametrize(("stamp", "pipeline", "handed_off", "phase"), [
    ("received", "P-MD", False, "router intake"),
    ("received", "colocated", False, "prefill"),
    ("prefill_sent", "P-MD", False, "prefill"),
    ("prefill_done", "P-MD", False, "KV transfer"),
    ("prefill_done", "colocated", False, "main decode (MD)"),
    ("kv_arrived", "P-MD", False, "main decode (MD)"),
    ("first_token", "P-RLD-MD", False, "relay decode (RLD)"),
    ("handoff_start", "P-RLD-MD", False, "handoff"),
    ("handoff_end", "P-RLD-MD", True, "main decode (MD)"),
    ("md_decode_start", "P-RLD-MD", True, "main decode (MD)"),
    ("finished", "P-MD", False, "other"),
])
def test_stamps_open_the_phase_that_follows_them(stamp, pipeline, handed_off, phase):
    from loadgen.report.timeline import phase_after

    assert phase_after(stamp, pipeline, handed_off) == phase


@pytest.mark.skipif(chromium() is None, reason="needs Debian's chromium (.ci/run installs it)")
async def test_every_image_of_the_report_loads_in_a_real_browser(fake_router, tmp_path):
    report = build_report(await two_rates(fake_router, tmp_path), tmp_path / "report")
    images = await inspect_page(report.index, tmp_path / "screenshot.png")
    assert {src for src, *_ in images} == {p.name for p in report.images.values()}
    assert all(complete and width > 0 for _, complete, width, _ in images), images
    assert_real_picture(tmp_path / "screenshot.png")
