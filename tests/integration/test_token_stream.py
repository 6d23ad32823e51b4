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


def _stream(url: str, prompt: list[int], max_tokens: int, ends: dict | None = None) -> tuple[list[str], list[float]]:
    """The text of each token chunk and the moment its line reached the client; `ends` gets the `pdd` object."""
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
            elif ends is not None:
                ends.update(json.loads(line[len(b"data: "):])["pdd"])
    return texts, times


def _decode_steps(scenario, role: str, context: int, count: int) -> list[float]:
    """The roofline's decode step times of a lone sequence on `role`'s pool, from `context` tokens on."""
    pool = next(p for p in scenario.pools if p.role.value == role)
    clock = RooflineClock.for_names(pool.gpu, scenario.model, tp=pool.tp)
    return [clock.step_seconds(StepBatch(decode_contexts=(context + i,))) for i in range(1, count + 1)]


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
    steps = _decode_steps(SCENARIO, "decode", len(prompt), 119)
    gaps = [b - a for a, b in zip(times, times[1:])]
    # Tokens held back and sent in bursts would make most gaps near zero; late ones would stretch them.
    assert_close(statistics.median(gaps), statistics.median(steps), rel=0.3, abs_=0.002, what="median gap")
    assert_close(times[-1] - times[0], sum(steps), rel=0.15, abs_=0.02, what="first to last token")


@pytest.fixture(scope="module")
def pdd_mesh(tmp_path_factory):
    with running_mesh("pdd-mini", tmp_path_factory.mktemp("token-stream-pdd")) as url:
        yield url


def test_relayed_tokens_and_main_decodes_leave_at_their_own_step_ends(pdd_mesh):
    """P-RLD-MD: the relay's tokens at the relay's decode steps, main decode's at its own, the text exact."""
    pdd_scenario = load_scenario("pdd-mini")
    prompt = [(i * 7919 + 3 * 104729) % 50000 for i in range(8000)]  # its KV takes about 0.85 s over the WAN
    _stream(pdd_mesh, [1, 2, 3], 4)  # opens the feeds
    ends: dict = {}
    texts, times = _stream(pdd_mesh, prompt, 200, ends)
    assert ends["pipeline"] == "P-RLD-MD" and ends["rld_tokens"] > 10 and ends["md_tokens"] > 10
    assert len(texts) == 200  # one chunk per token
    assert "".join(texts).encode() == _expected_text(prompt, 200).encode()
    cut = ends["handoff"]["cut"]
    relay_gaps = [b - a for a, b in zip(times[:cut], times[1:cut])]
    relay_steps = _decode_steps(pdd_scenario, "relay-decode", len(prompt), cut - 1)
    assert_close(statistics.median(relay_gaps), statistics.median(relay_steps), rel=0.3, abs_=0.002,
                 what="median gap of the relay's tokens")
    # Main decode's first token ends the handoff stall; from the next one on, its decode steps set the pace.
    main_gaps = [b - a for a, b in zip(times[cut:], times[cut + 1:])]
    main_steps = _decode_steps(pdd_scenario, "main-decode", len(prompt) + cut, len(main_gaps))
    assert_close(statistics.median(main_gaps), statistics.median(main_steps), rel=0.3, abs_=0.002,
                 what="median gap of main decode's tokens")
