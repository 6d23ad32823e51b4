"""`pdd-emu bench` as a process: Ctrl-C keeps partial results; bad input exits 2 with one line."""

import asyncio
import json
import signal
import sys
from pathlib import Path

from tests.waiting import until

ROOT = Path(__file__).resolve().parents[2]


async def start_cli(*args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.loadgen.cli", *args, cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )


async def test_sigint_stops_cleanly_and_keeps_partial_results(fake_router, tmp_path):
    fake_router.fail = lambda served: "stall" if served.request_id.endswith("-t1") else None
    out = tmp_path / "run"
    process = await start_cli("bench", "--url", fake_router.url, "--workload",
                              "agentic:context=2K,output=4,think=0,turns=3",
                              "--rate", "20", "--duration", "120s", "--out", str(out))
    try:
        await until(lambda: any(s.request_id.endswith("-t1") for s in fake_router.served),
                    "a second turn reached the router", 60, poll_s=0.02)
        process.send_signal(signal.SIGINT)
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 130, stderr.decode()
    summary = json.loads((out / "summary.json").read_text())
    records = [json.loads(line) for line in (out / "requests.jsonl").read_text().splitlines()]
    assert summary["sent"] == len(records) >= 2
    assert summary["cancelled"] >= 1 and summary["completed"] >= 1 and summary["interrupted"] is True
    assert any(r["status"] == "cancelled" and r["id"].endswith("-t1") for r in records)
    assert "cancelled" in stdout.decode()
    assert "bench" in stderr.decode()  # the progress bar ran


async def test_bad_workload_spec_exits_2_with_one_line(tmp_path):
    process = await start_cli("bench", "--url", "http://127.0.0.1:9", "--workload", "agentic:contxt=1",
                              "--rate", "1", "--duration", "1s", "--out", str(tmp_path))
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 2
    assert stderr.decode().strip() == ("pdd-emu: error: workload agentic: unknown key 'contxt'; valid keys: "
                                       "cache_outputs, context, hits, initial, join, output, rate, sessions, think, "
                                       "tool, turns, vocab")


async def test_rate_and_concurrency_together_are_refused(tmp_path):
    process = await start_cli("bench", "--url", "http://x", "--workload", "agentic", "--rate", "1",
                              "--concurrency", "2", "--duration", "1s", "--out", str(tmp_path))
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 2
    assert "not allowed with argument" in stderr.decode()


async def test_bad_duration_is_refused(tmp_path):
    process = await start_cli("bench", "--url", "http://x", "--workload", "agentic", "--rate", "1",
                              "--duration", "soon", "--out", str(tmp_path))
    _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 2
    assert "cannot read duration 'soon'" in stderr.decode()
