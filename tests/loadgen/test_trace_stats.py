import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from loadgen.trace_stats import trace_stats

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "loadgen" / "samples" / "mooncake-sample.jsonl"


def brute_force_reuse(rows: list[dict], block_size: int) -> tuple[float, float]:
    """Reference: a request reuses its longest common hash-id prefix with any earlier request."""
    reused_blocks = reused_tokens = 0
    for i, row in enumerate(rows):
        best = 0
        for earlier in rows[:i]:
            a, b = row["hash_ids"], earlier["hash_ids"]
            n = 0
            while n < min(len(a), len(b)) and a[n] == b[n]:
                n += 1
            best = max(best, n)
        reused_blocks += best
        full_blocks = len(row["hash_ids"]) - 1
        last_block = row["input_length"] - block_size * full_blocks
        reused_tokens += block_size * min(best, full_blocks) + (last_block if best > full_blocks else 0)
    total_blocks = sum(len(r["hash_ids"]) for r in rows)
    total_tokens = sum(r["input_length"] for r in rows)
    return reused_blocks / total_blocks, reused_tokens / total_tokens


def sample_rows(limit: int) -> list[dict]:
    with open(SAMPLE) as lines:
        return [json.loads(line) for _, line in zip(range(limit), lines)]


def test_sample_reuse_matches_a_brute_force_reference():
    rows = sample_rows(500)
    blocks, tokens = brute_force_reuse(rows, 512)
    stats = trace_stats(SAMPLE, limit=500)
    assert stats.requests == 500
    assert stats.block_reuse == pytest.approx(blocks, abs=1e-12)
    assert stats.token_reuse == pytest.approx(tokens, abs=1e-12)
    assert 0.05 < stats.block_reuse < 0.5  # the slice really does reuse prefixes


def test_lengths_and_duration():
    rows = sample_rows(500)
    stats = trace_stats(SAMPLE, limit=500)
    inputs = [r["input_length"] for r in rows]
    assert stats.input_length["p90"] == pytest.approx(np.percentile(inputs, 90))
    assert stats.input_length["mean"] == pytest.approx(np.mean(inputs))
    assert stats.output_length["p50"] == pytest.approx(np.median([r["output_length"] for r in rows]))
    assert stats.duration_s == pytest.approx((rows[-1]["timestamp"] - rows[0]["timestamp"]) / 1000)


def test_a_partial_last_block_counts_at_its_length(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text(
        json.dumps({"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}) + "\n"
        + json.dumps({"timestamp": 10, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}) + "\n"
    )
    stats = trace_stats(trace)
    assert stats.block_reuse == 0.5
    assert stats.token_reuse == 0.5  # 600 of 1200 tokens, not 1024


def test_cli_prints_table_and_json():
    command = [sys.executable, "-m", "tests.loadgen.cli", "trace", "stats", str(SAMPLE), "--limit", "500"]
    table = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True).stdout
    stats = trace_stats(SAMPLE, limit=500)
    assert "requests      500" in table
    assert f"block_reuse   {stats.block_reuse:.1%}" in table
    as_json = subprocess.run(command + ["--json"], cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(as_json.stdout)["token_reuse"] == pytest.approx(stats.token_reuse)


def test_cli_refuses_a_missing_file():
    result = subprocess.run([sys.executable, "-m", "tests.loadgen.cli", "trace", "stats", "/no/trace.jsonl"],
                            cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2
    assert "does not exist" in result.stderr
