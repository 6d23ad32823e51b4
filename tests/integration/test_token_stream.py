"""Tokens through the token feed, seen by a client: the engine's exact text, one chunk per step end."""

from __future__ import annotations

import json
import statistics
import time
import urllib.request

import pytest

from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.engine.tokens import WordTokenizer, output_token, prompt_fingerprint
from services.profiles import load_model
from services.scenario import load_scenario
from tests.integration.mesh import get_json, plan_of, running_mesh
from tests.tolerance import assert_close

pytestmark = pytest.mark.integration

SCENARIO = load_scenario("pd-intra-mini")
MODEL = load_model(SCENARIO.model)


def _stream(url: str, prompt: list[int], max_tokens: int) -> tuple[list[str], list[float]]:
    """The text of each token chunk and the moment its line reached the client."""
    body = json.dumps({"model": SCENARIO.model, "prompt": prompt, "max_tokens": max_tokens, "stream": True})
    request = urllib.request.Request(f"{url}/v1/completions", data=body.encode(), method="POST",
                                     headers={"content-type": "application/json"})
    texts, times = [], []
    with urllib.request.urlopen(request, timeout=60) as reply:
        for line in reply:
            if not line.startswith(b"data: {"):
                continue
            choice = json.loads(line[len(b"data: "):])["choices"][0]
            if choice["finish_reason"] is None:
                texts.append(choice["text"])
                times.append(time.perf_counter())
    return texts, times


def _expected_text(prompt: list[int], max_tokens: int) -> str:
    ids = [output_token(prompt_fingerprint(prompt), i, SCENARIO.seed, MODEL.vocab_size) for i in range(max_tokens)]
    return WordTokenizer(MODEL.vocab_size).decode(ids)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("token-stream")
    with running_mesh("pd-intra-mini", run_dir) as url:
        yield url, run_dir


def _router_feed(run_dir) -> dict:
    router = next(s for s in plan_of(run_dir)["services"] if s["role"] == "router")
    return get_json(f"http://{router['host']}:{router['http_port']}/stats")["token_feed"]


def test_text_is_the_engines_exact_text_with_and_without_the_feed(mesh):
    url, run_dir = mesh
    prompt = [(i * 131) % 30000 for i in range(300)]
    first, _ = _stream(url, prompt, 40)  # may precede the feed: its tokens ride the Generate stream
    before = _router_feed(run_dir)["tokens"]
    second, _ = _stream(url, prompt, 40)
    assert _router_feed(run_dir)["tokens"] - before == 40  # every token of this one came through the feed
    expected = _expected_text(prompt, 40)
    assert "".join(first).encode() == "".join(second).encode() == expected.encode()
    assert len(second) == 40  # one chunk per token


def test_each_token_reaches_the_client_at_the_end_of_its_decode_step(mesh):
    """On an idle mesh a lone stream's gaps are its decode steps, as the roofline clock times them."""
    url, _ = mesh
    prompt = [(i * 977) % 30000 for i in range(2000)]
    _stream(url, [1, 2, 3], 4)  # the feed is open from here on
    _, times = _stream(url, prompt, 120)
    pool = next(p for p in SCENARIO.pools if p.role.value == "decode")
    clock = RooflineClock.for_names(pool.gpu, SCENARIO.model, tp=pool.tp)
    steps = [clock.step_seconds(StepBatch(decode_contexts=(len(prompt) + i,))) for i in range(1, 120)]
    gaps = [b - a for a, b in zip(times, times[1:])]
    # Tokens held back and sent in bursts would make most gaps near zero; late ones would stretch them.
    assert_close(statistics.median(gaps), statistics.median(steps), rel=0.3, abs_=0.002, what="median gap")
    assert_close(times[-1] - times[0], sum(steps), rel=0.15, abs_=0.02, what="first to last token")
