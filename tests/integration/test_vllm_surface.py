"""vLLM's side of the router on a real pd-cross mesh: tokenizer endpoints, version, id-list batches,
continuous usage, the dashboard series with vLLM's names and buckets, and links labelled by name."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.engine.tokens import WordTokenizer
from services.profiles import load_model
from tests.integration.mesh import get_json, plan_of, running_mesh

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
VOCAB = load_model(MODEL).vocab_size
WORDS = WordTokenizer(VOCAB)
WORD = WORDS.token_name(1234)  # a pseudo-word: one token


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("vllm-surface")
    with running_mesh("pd-cross-mini", run_dir) as router:
        yield router, run_dir


def _post(url: str, path: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _families(url: str, headers: dict[str, str] | None = None) -> dict:
    with urllib.request.urlopen(urllib.request.Request(f"{url}/metrics", headers=headers or {}), timeout=10) as reply:
        return {f.name: f for f in text_string_to_metric_families(reply.read().decode())}


def test_tokenize_and_detokenize_answer_in_vllms_shapes_with_the_mesh_ids(mesh):
    url, _ = mesh
    status, raw = _post(url, "/tokenize", {"model": MODEL, "prompt": f"{WORD} Hi", "return_token_strs": True})
    body = json.loads(raw)
    assert status == 200 and list(body) == ["count", "max_model_len", "tokens", "token_strs"]
    assert body["tokens"] == WORDS.encode(f"{WORD} Hi") == [1234, VOCAB + ord("H"), VOCAB + 256 + ord("i")]
    assert body["count"] == 3 and body["token_strs"] == [WORD, "H", "##i"]
    assert body["max_model_len"] == load_model(MODEL).max_context
    chat = json.loads(_post(url, "/tokenize", {"messages": [{"role": "user", "content": WORD}]})[1])
    assert chat["count"] == len(WORDS.encode(f"<user> {WORD}")) == 7  # "<user>" is 6 bytes
    status, raw = _post(url, "/detokenize", {"model": MODEL, "tokens": body["tokens"]})
    assert status == 200 and json.loads(raw) == {"prompt": f"{WORD} \x7fHi"}  # DEL marks a piece of bytes
    assert _post(url, "/tokenize", {"model": "other", "prompt": "x"})[0] == 404
    status, raw = _post(url, "/detokenize", {"tokens": [VOCAB + 10_000]})
    assert status == 400 and "outside the vocabulary" in json.loads(raw)["error"]["message"]
    assert get_json(f"{url}/version")["version"]


def test_a_prompt_of_id_lists_is_a_batch_and_counts_its_tokens(mesh):
    url, _ = mesh
    status, raw = _post(url, "/v1/completions", {"model": MODEL, "prompt": [[1, 2, 3], [4, 5]], "max_tokens": 3})
    body = json.loads(raw)
    assert status == 200 and [c["index"] for c in body["choices"]] == [0, 1]
    assert body["usage"]["prompt_tokens"] == 5 and body["usage"]["completion_tokens"] == 6
    single = json.loads(_post(url, "/v1/completions", {"model": MODEL, "prompt": [4, 5], "max_tokens": 3})[1])
    assert body["choices"][1]["text"] == single["choices"][0]["text"]  # the same prompt, the same text
    status, raw = _post(url, "/v1/completions", {"model": MODEL, "prompt": [[1, 2], [3, "x"]], "max_tokens": 3})
    assert status == 400 and "prompt[1]" in json.loads(raw)["error"]["message"]


def test_continuous_usage_puts_the_count_so_far_in_every_chunk(mesh):
    url, _ = mesh
    status, raw = _post(url, "/v1/completions", {
        "model": MODEL, "prompt": f"{WORD} {WORD}", "max_tokens": 4, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    events = [json.loads(line[6:]) for line in raw.decode().splitlines()
              if line.startswith("data: {")]
    assert status == 200
    usages = [e["usage"] for e in events]
    assert [u["completion_tokens"] for u in usages[:4]] == [1, 2, 3, 4]
    assert usages[4]["completion_tokens"] == 4 and events[4]["choices"][0]["finish_reason"] == "length"
    assert all(u["prompt_tokens"] == 2 and u["total_tokens"] == 2 + u["completion_tokens"] for u in usages)
    assert list(usages[0]) == ["prompt_tokens", "total_tokens", "completion_tokens"]  # vLLM's field order
    assert events[-1]["choices"] == []  # the usage chunk still ends the stream
    plain = _post(url, "/v1/completions", {"model": MODEL, "prompt": WORD, "max_tokens": 2, "stream": True,
                                           "stream_options": {"include_usage": True}})[1].decode()
    assert plain.count('"usage"') == 1


def test_the_dashboard_series_have_vllms_names_types_and_buckets(mesh):
    url, run_dir = mesh

    def generated(families) -> dict[str, float]:
        return {s.labels["le"]: s.value for s in families["vllm:request_generation_tokens"].samples
                if s.name.endswith("_bucket")}

    before = generated(_families(url))
    _post(url, "/v1/completions", {"model": MODEL, "prompt": f"{WORD} {WORD} {WORD}", "max_tokens": 5})
    router = _families(url)
    kinds = {name: router[name].type for name in (
        "vllm:request_prompt_tokens", "vllm:request_generation_tokens", "vllm:request_decode_time_seconds",
        "vllm:request_inference_time_seconds", "vllm:num_requests_swapped")}
    assert kinds == {"vllm:request_prompt_tokens": "histogram", "vllm:request_generation_tokens": "histogram",
                     "vllm:request_decode_time_seconds": "histogram",
                     "vllm:request_inference_time_seconds": "histogram", "vllm:num_requests_swapped": "gauge"}
    e2e_bounds = [s.labels["le"] for s in router["vllm:e2e_request_latency_seconds"].samples
                  if s.name.endswith("_bucket")]
    assert e2e_bounds[:8] == ["0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0"]  # vLLM's, no 2 s to 5 s jump
    after = generated(router)
    assert after["2.0"] == before["2.0"] and after["5.0"] == before["5.0"] + 1  # 5 tokens: in le=5, not le=2
    decode_pool = next(s for s in plan_of(run_dir)["services"] if s["role"] == "decode")
    pool = _families(f"http://{decode_pool['host']}:{decode_pool['http_port']}")
    steps = [s for s in pool["vllm:iteration_tokens_total"].samples if s.name.endswith("_count")]
    assert pool["vllm:iteration_tokens_total"].type == "histogram" and sum(s.value for s in steps) >= 4
    info = pool["vllm:cache_config_info"].samples[0]
    assert info.value == 1 and int(info.labels["num_gpu_blocks"]) > 0 and info.labels["block_size"]


def test_each_link_labels_its_series_with_its_name(mesh):
    _, run_dir = mesh
    links = plan_of(run_dir)["links"]
    for link in links:
        auth = {"Authorization": f"Bearer {(run_dir / 'link-token').read_text()}"}  # `pdd-emu up` made it
        series = _families(f"http://{link['host']}:{link['control_port']}", auth)["pdd_netem_delivered_bytes"]
        assert {s.labels["link"] for s in series.samples} == {link["name"]} != {"link"}
    assert [link["name"] for link in links] == ["prefill-to-decode"]
