"""inference-perf (llm-d's benchmark), unmodified and offline, counts its prompts with
`pdd-emu tokenizer export` and the mesh reads exactly as many tokens.

inference-perf's synthetic data cuts its Shakespeare corpus's ids to each prompt's
length and decodes them, re-encoding until the text has exactly that many tokens
by its tokenizer; the mesh's count must then agree. It needs Python 3.12 or later,
so it lives in its own virtual environment, `.venv-inference-perf` (.ci/run makes
it with a Python 3.12 where the machine has one); PDD_INFERENCE_PERF may name
another inference-perf executable.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from services.engine.tokens import WordTokenizer
from services.profiles import load_model
from tests.integration.mesh import running_mesh

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
INFERENCE_PERF = Path(os.environ.get("PDD_INFERENCE_PERF",
                                     ROOT / ".venv-inference-perf" / "bin" / "inference-perf"))
REQUESTS, PROMPT_TOKENS, OUTPUT_TOKENS = 12, 96, 16

CONFIG = """
load: {{type: constant, stages: [{{rate: 4, duration: 3}}]}}
api: {{type: completion, streaming: true}}
server: {{type: vllm, model_name: llama3-8b, base_url: "{url}", ignore_eos: true}}
tokenizer: {{pretrained_model_name_or_path: "{tokenizer}"}}
data:
  type: synthetic
  input_distribution: {{min: {prompt}, max: {prompt}, mean: {prompt}, std_dev: 0, total_count: {requests}}}
  output_distribution: {{min: {output}, max: {output}, mean: {output}, std_dev: 0, total_count: {requests}}}
report: {{request_lifecycle: {{summary: true, per_request: true}}}}
storage: {{local_storage: {{path: "{reports}"}}}}
"""


@pytest.mark.skipif(not INFERENCE_PERF.is_file(),
                    reason="needs inference-perf in .venv-inference-perf (.ci/run installs it on Python 3.12+)")
def test_inference_perf_and_the_mesh_count_the_same_prompt_tokens(tmp_path):
    tokenizer, reports = tmp_path / "tokenizer", tmp_path / "reports"
    subprocess.run([sys.executable, "-m", "services.cli", "tokenizer", "export", str(tokenizer)], check=True,
                   cwd=ROOT, capture_output=True, timeout=120)
    with running_mesh("colocated-mini", tmp_path / "mesh") as url:
        config = tmp_path / "config.yml"
        config.write_text(CONFIG.format(url=url, tokenizer=tokenizer, reports=reports, prompt=PROMPT_TOKENS,
                                        output=OUTPUT_TOKENS, requests=REQUESTS))
        run = subprocess.run([str(INFERENCE_PERF), "-c", str(config)], cwd=tmp_path, capture_output=True,
                             text=True, timeout=300, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    requests = json.loads((reports / "per_request_lifecycle_metrics.json").read_text())
    assert len(requests) == REQUESTS and not any(r["error"] for r in requests)
    mesh = WordTokenizer(load_model("llama3-8b").vocab_size)
    for request in requests:
        prompt = json.loads(request["request"])["prompt"]
        info = request["info"]
        assert info["request_metrics"]["text"]["input_tokens"] == PROMPT_TOKENS
        assert len(mesh.encode(prompt)) == info["response_metrics"]["server_usage"]["prompt_tokens"] == PROMPT_TOKENS
        assert info["response_metrics"]["output_tokens"] == OUTPUT_TOKENS
        assert len(prompt.split()) > 10  # the corpus's English words, each as its bytes
