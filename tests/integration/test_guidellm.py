"""guidellm, unmodified and offline, builds its N-token prompts with `pdd-emu tokenizer export` and the
mesh reads exactly N tokens in each.

guidellm makes a synthetic prompt by encoding Faker's English text, cutting the
first N ids and decoding them (its synthetic_text data); before byte fallback
every English word was `<unk>`, decoded to nothing, and prompts came out a few
tokens long. It lives in its own virtual environment, `.venv-guidellm` (.ci/run
creates it); PDD_GUIDELLM may name another guidellm executable.
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

from services.engine.tokens import WordTokenizer
from services.profiles import load_model
from tests.integration.mesh import running_mesh

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
GUIDELLM = Path(os.environ.get("PDD_GUIDELLM", ROOT / ".venv-guidellm" / "bin" / "guidellm"))
REQUESTS, PROMPT_TOKENS, OUTPUT_TOKENS = 10, 128, 16


def _prompt_token_sum(url: str) -> float:
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as reply:
        families = text_string_to_metric_families(reply.read().decode())
    return next(s.value for f in families if f.name == "vllm:request_prompt_tokens" for s in f.samples
                if s.name == "vllm:request_prompt_tokens_sum")


@pytest.mark.skipif(not GUIDELLM.is_file(), reason="needs guidellm in .venv-guidellm (.ci/run installs it)")
def test_guidellm_prompts_have_the_lengths_it_asked_for(tmp_path):
    tokenizer = tmp_path / "tokenizer"
    subprocess.run([sys.executable, "-m", "services.cli", "tokenizer", "export", str(tokenizer)], check=True,
                   cwd=ROOT, capture_output=True, timeout=120)
    report = tmp_path / "guidellm.json"
    with running_mesh("colocated-mini", tmp_path / "mesh") as url:
        before = _prompt_token_sum(url)
        run = subprocess.run(
            [str(GUIDELLM), "run", "--backend",
             f"kind=openai_http,target={url},model=llama3-8b,request_format=/v1/completions",
             "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
             "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},output_tokens={OUTPUT_TOKENS}",
             "--profile", "kind=synchronous", "--constraint", f"kind=max_requests,count={REQUESTS}",
             "--output", f"kind=json,path={report}", "--disable-progress"],
            cwd=tmp_path, capture_output=True, text=True, timeout=300,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        after = _prompt_token_sum(url)
    requests = json.loads(report.read_text())["benchmarks"][0]["requests"]
    assert not requests["errored"] and len(requests["successful"]) == REQUESTS
    mesh = WordTokenizer(load_model("llama3-8b").vocab_size)
    for request in requests["successful"]:
        prompt = json.loads(request["request_args"])["body"]["prompt"]
        assert len(mesh.encode(prompt)) == PROMPT_TOKENS, prompt  # the mesh reads what guidellm asked for
        assert request["input_metrics"]["text_tokens"] == PROMPT_TOKENS
        assert request["output_metrics"]["text_tokens"] == OUTPUT_TOKENS
        assert len(prompt.split()) > 10  # English words as bytes, not a handful of <unk>s decoded to nothing
    assert after - before == REQUESTS * PROMPT_TOKENS  # the router counted the same tokens
