"""NVIDIA's aiperf, unmodified and offline, against a real mesh, counting tokens with `pdd-emu tokenizer export`.

aiperf's dependencies are heavy (about 100 packages, 1.2 GB), so it lives in its
own virtual environment, `.venv-aiperf` (.ci/run creates it); PDD_AIPERF may
name another aiperf executable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.mesh import running_mesh
from tests.tolerance import assert_at_least, assert_close

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
AIPERF = Path(os.environ.get("PDD_AIPERF", ROOT / ".venv-aiperf" / "bin" / "aiperf"))
REQUESTS = 24


def _router_ttft(url: str) -> tuple[float, float]:
    """(sum in seconds, count) of the router's TTFT histogram."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
        families = text_string_to_metric_families(reply.read().decode())
    samples = {s.name: s.value for f in families if f.name == "vllm:time_to_first_token_seconds" for s in f.samples}
    return samples["vllm:time_to_first_token_seconds_sum"], samples["vllm:time_to_first_token_seconds_count"]


@pytest.mark.skipif(not AIPERF.is_file(), reason="needs aiperf in .venv-aiperf (.ci/run installs it)")
def test_aiperf_counts_tokens_as_the_mesh_and_sees_the_routers_ttft(tmp_path):
    tokenizer = tmp_path / "tokenizer"
    subprocess.run([sys.executable, "-m", "services.cli", "tokenizer", "export", str(tokenizer)], check=True,
                   cwd=ROOT, capture_output=True, timeout=120)
    with running_mesh("colocated-mini", tmp_path / "mesh") as url:
        before_sum, before_count = _router_ttft(url)
        run = subprocess.run(
            [str(AIPERF), "profile", "--model", "llama3-8b", "--url", url, "--endpoint-type", "completions",
             "--streaming", "--tokenizer", str(tokenizer), "--isl", "64", "--osl", "16", "--request-count",
             str(REQUESTS), "--concurrency", "2", "--random-seed", "1", "--artifact-dir", str(tmp_path / "aiperf"),
             "--ui-type", "none"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        after_sum, after_count = _router_ttft(url)
    result = json.loads((tmp_path / "aiperf" / "profile_export_aiperf.json").read_text())
    assert result["request_count"]["avg"] == REQUESTS and not result["error_summary"]
    # The exported tokenizer counts what the mesh generated: exactly --osl tokens, and --isl prompt tokens.
    assert result["output_sequence_length"]["avg"] == 16 and result["input_sequence_length"]["avg"] == 64
    # The server's usage agrees with aiperf's own count, and carries the prefix-cache hits aiperf reports.
    assert result["usage_discrepancy_count"]["avg"] == 0 and "usage_prompt_cache_read_tokens" in result
    assert after_count - before_count == REQUESTS
    router_ms = 1000 * (after_sum - before_sum) / REQUESTS
    client_ms = result["time_to_first_token"]["avg"]
    # The client's TTFT holds the router's plus one HTTP hop and its own parsing: never less, and close.
    assert_at_least(client_ms, router_ms, what="aiperf mean TTFT (ms)")
    assert_close(client_ms, router_ms, rel=0.5, abs_=25.0, what="aiperf against router mean TTFT (ms)")
