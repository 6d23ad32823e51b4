"""The router's OpenAI-compatible surface on a real colocated mesh: chat, models, ids, errors."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
import pytest

from prometheus_client.parser import text_string_to_metric_families

from tests.integration.mesh import get_json, plan_of, running_mesh

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("api")
    with running_mesh("colocated-mini", run_dir) as router:
        yield router, run_dir


@pytest.fixture(scope="module")
def url(mesh):
    return mesh[0]


def _post(url: str, body: bytes, headers: dict | None = None) -> tuple[int, dict, dict]:
    request = urllib.request.Request(f"{url}/v1/completions", data=body, method="POST",
                                     headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as reply:
            return reply.status, dict(reply.headers), json.loads(reply.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


def test_models_lists_the_scenario_model(url):
    models = get_json(f"{url}/v1/models")
    assert [m["id"] for m in models["data"]] == ["llama3-8b"] and models["data"][0]["max_model_len"] >= 32768


def test_chat_completion_streams_exactly_max_tokens(url):
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=60, max_retries=0)
    stream = client.chat.completions.create(model="llama3-8b", max_tokens=12, stream=True,
                                            messages=[{"role": "user", "content": "plan the next step"}])
    pieces = [c.choices[0].delta.content for c in stream if c.choices and c.choices[0].delta.content]
    assert len(pieces) == 12
    reply = client.chat.completions.create(model="llama3-8b", max_tokens=12,
                                           messages=[{"role": "user", "content": "plan the next step"}])
    assert reply.choices[0].message.content == "".join(pieces) and reply.usage.completion_tokens == 12


def test_request_id_is_echoed_and_usage_is_counted(url):
    body = json.dumps({"model": "llama3-8b", "prompt": [1, 2, 3, 4], "max_tokens": 3}).encode()
    status, headers, reply = _post(url, body, {"x-request-id": "trace-me-42"})
    assert status == 200 and headers["x-request-id"] == "trace-me-42" and reply["id"] == "cmpl-trace-me-42"
    assert reply["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7,
                              "prompt_tokens_details": {"cached_tokens": 0}}
    assert reply["pdd"]["pipeline"] == "colocated"


@pytest.mark.parametrize("body, status, fragment", [
    (b"{not json", 400, "not valid JSON"),
    (b"[1, 2]", 400, "JSON object"),
    (json.dumps({"model": "llama3-8b", "prompt": "", "max_tokens": 4}).encode(), 400, "empty"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": -1}).encode(), 400, "max_tokens"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": "many"}).encode(), 400, "max_tokens"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": 10**9}).encode(), 400, "context"),
    (json.dumps({"model": "llama3-8b", "prompt": [10**9], "max_tokens": 2}).encode(), 400, "token ids"),
    (json.dumps({"model": "gpt-x", "prompt": "x", "max_tokens": 2}).encode(), 404, "not served"),
    (json.dumps({"model": "llama3-8b", "prompt": "x", "max_tokens": 2, "stream": "yes"}).encode(), 400, "stream"),
])
def test_bad_requests_get_openai_errors_and_the_router_keeps_serving(url, body, status, fragment):
    got, _, reply = _post(url, body)
    assert got == status and fragment in reply["error"]["message"] and reply["error"]["type"]
    ok, _, _ = _post(url, json.dumps({"model": "llama3-8b", "prompt": "still here", "max_tokens": 2}).encode())
    assert ok == 200


def test_oversized_body_is_refused_before_it_is_read(url):
    status, _, reply = _post(url, b" " * (17 * 1024 * 1024))
    assert status == 413 and "exceeds" in reply["error"]["message"]


def _client(url: str):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused", timeout=60, max_retries=0)


def test_models_retrieve_and_unknown_routes_are_json(url):
    client = _client(url)
    assert client.models.retrieve("llama3-8b").id == "llama3-8b"
    with pytest.raises(openai.NotFoundError) as missing:
        client.models.retrieve("gpt-4o")
    assert missing.value.body["code"] == "model_not_found"
    with pytest.raises(urllib.error.HTTPError) as route:
        urllib.request.urlopen(f"{url}/v1/nowhere", timeout=10)
    assert route.value.code == 404 and json.loads(route.value.read())["error"]["message"].startswith("Invalid URL")


def test_out_of_range_sampling_parameters_are_refused(url):
    with pytest.raises(openai.BadRequestError) as refused:
        _client(url).completions.create(model="llama3-8b", prompt="x", max_tokens=2, temperature=3)
    assert refused.value.body["param"] == "temperature"


def test_n_choices_and_prompt_batches_come_back_in_index_order(url):
    reply = _client(url).completions.create(model="llama3-8b", prompt=["first prompt", "second one"], n=2,
                                            max_tokens=4, seed=3)
    assert [c.index for c in reply.choices] == [0, 1, 2, 3]
    texts = [c.text for c in reply.choices]
    assert len(set(texts)) == 4  # each answer its own stream
    alone = _client(url).completions.create(model="llama3-8b", prompt="second one", max_tokens=4, seed=3)
    assert texts[2] == alone.choices[0].text
    # "first prompt" and "second one" are no pseudo-words: one token per byte (docs/engine.md, "Tokens")
    assert reply.usage.completion_tokens == 16 and reply.usage.prompt_tokens == len("firstpromptsecondone")


def test_streamed_n_choices_interleave_and_match_the_unstreamed_answer(url):
    client = _client(url)
    ask = dict(model="llama3-8b", max_tokens=48, n=2, seed=5, messages=[{"role": "user", "content": "two ways"}])
    whole = client.chat.completions.create(**ask)
    chunks = list(client.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}))
    texts, roles, finishes, order = {0: "", 1: ""}, {}, {}, []
    for chunk in chunks[:-1]:
        (choice,) = chunk.choices
        order.append(choice.index)
        texts[choice.index] += choice.delta.content or ""
        roles.setdefault(choice.index, choice.delta.role)
        if choice.finish_reason:
            finishes[choice.index] = choice.finish_reason
    assert texts == {c.index: c.message.content for c in whole.choices} and texts[0] != texts[1]
    assert roles == {0: "assistant", 1: "assistant"} and finishes == {0: "length", 1: "length"}
    switches = sum(a != b for a, b in zip(order, order[1:]))
    assert switches > 1, order  # the choices interleave: one after the other switches once
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 96
    assert chunks[-1].usage.prompt_tokens == whole.usage.prompt_tokens


def test_a_streamed_prompt_batch_gives_each_prompt_its_index(url):
    client = _client(url)
    prompts = ["first prompt", "second one", "a third"]
    chunks = list(client.completions.create(model="llama3-8b", prompt=prompts, max_tokens=4, seed=3, stream=True))
    texts = ["", "", ""]
    for chunk in chunks:
        texts[chunk.choices[0].index] += chunk.choices[0].text
    alone = [client.completions.create(model="llama3-8b", prompt=p, max_tokens=4, seed=3).choices[0].text
             for p in prompts]
    assert texts == alone
    assert all(chunk.usage is None for chunk in chunks)  # no include_usage: no usage anywhere


def test_stop_cuts_the_text_and_the_generation(url):
    client = _client(url)
    whole = client.completions.create(model="llama3-8b", prompt="stop here", max_tokens=12).choices[0].text
    stop = whole.split()[4]
    cut = client.completions.create(model="llama3-8b", prompt="stop here", max_tokens=12, stop=[stop])
    assert cut.choices[0].text == whole[: whole.index(stop)] and cut.choices[0].finish_reason == "stop"
    assert cut.usage.completion_tokens == len(whole[: whole.index(stop)].split()) + 1  # the mesh stopped too


def test_logprobs_are_deterministic_and_valid(url):
    client = _client(url)
    ask = dict(model="llama3-8b", max_tokens=5, logprobs=True, top_logprobs=3,
               messages=[{"role": "user", "content": [{"type": "text", "text": "tell me"}]}])
    first, again = client.chat.completions.create(**ask), client.chat.completions.create(**ask)
    content = first.choices[0].logprobs.content
    assert len(content) == 5 and content == again.choices[0].logprobs.content
    for entry in content:
        tops = [t.logprob for t in entry.top_logprobs]
        assert entry.logprob <= 0 and len(tops) == 3 and tops == sorted(tops, reverse=True)
    echoed = client.completions.create(model="llama3-8b", prompt="echo me", max_tokens=2, echo=True, logprobs=2)
    assert echoed.choices[0].text.startswith("echo me") and echoed.choices[0].logprobs.token_logprobs[0] is None


def test_tool_turns_are_accepted(url):
    reply = _client(url).chat.completions.create(model="llama3-8b", max_tokens=3, messages=[
        {"role": "user", "content": "weather?", "name": "ana"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "rain"}],
        tools=[{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}],
        response_format={"type": "text"})
    assert reply.choices[0].finish_reason == "length" and reply.usage.completion_tokens == 3


def test_cached_tokens_are_the_prefix_the_mesh_hit(url):
    client = _client(url)
    prompt = " ".join(f"w{i}" for i in range(400))
    client.completions.create(model="llama3-8b", prompt=prompt, max_tokens=2)
    again = client.completions.create(model="llama3-8b", prompt=prompt, max_tokens=2)
    cached = again.usage.prompt_tokens_details.cached_tokens
    assert cached == again.model_extra["pdd"]["prefill_hit_tokens"] and 0 < cached <= again.usage.prompt_tokens


def test_every_vllm_metric_has_model_name_and_one_owner(mesh):
    url, run_dir = mesh
    _client(url).completions.create(model="llama3-8b", prompt="count me once", max_tokens=4)
    owners: dict[str, set[str]] = {}
    for service in plan_of(run_dir)["services"]:
        with urllib.request.urlopen(f"http://{service['host']}:{service['http_port']}/metrics", timeout=10) as r:
            text = r.read().decode()
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                assert "instance" not in sample.labels, (service["name"], sample)
                if family.name.startswith("vllm:"):
                    assert sample.labels.get("model_name") == "llama3-8b", (service["name"], sample)
                    owners.setdefault(family.name, set()).add(service["role"])
                if service["role"] != "router" and family.name.startswith(("vllm:", "pdd_pool")):
                    assert {"pool", "replica"} <= set(sample.labels), sample
    assert all(len(roles) == 1 for roles in owners.values()), owners
    for name in ("vllm:request_time_per_output_token_seconds", "vllm:num_requests_waiting",
                 "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds",
                 "vllm:generation_tokens", "vllm:kv_cache_usage_perc"):
        assert name in owners, name


def test_a_stream_stops_where_the_unstreamed_answer_does(url):
    client = _client(url)
    whole = client.completions.create(model="llama3-8b", prompt="stream a stop", max_tokens=12).choices[0].text
    stop = whole.split()[3][1:]  # inside a word: the text ends mid-token
    chunks = list(client.completions.create(model="llama3-8b", prompt="stream a stop", max_tokens=12, stop=stop,
                                            stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == whole[: whole.index(stop)]
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage.completion_tokens == 4 and chunks[-1].usage.prompt_tokens_details.cached_tokens >= 0


def test_streamed_chat_chunks_carry_their_logprobs(url):
    ask = dict(model="llama3-8b", max_tokens=4, logprobs=True, top_logprobs=2,
               messages=[{"role": "user", "content": "stream logprobs"}])
    whole = _client(url).chat.completions.create(**ask).choices[0].logprobs.content
    streamed = [c.choices[0].logprobs.content[0] for c in _client(url).chat.completions.create(**ask, stream=True)
                if c.choices and c.choices[0].logprobs]
    assert streamed == whole
