"""One to three output tokens on every pipeline: prefill's token alone must be a whole answer.

With max_tokens 1 the only token comes from prefill, so a relay has nothing to decode and
nothing to hand off; the request must end there instead of failing main decode's handoff.
"""

from __future__ import annotations

import pytest

from services.chaos.outcomes import FaultFreeText
from services.profiles import load_model
from services.scenario import load_scenario
from tests.integration.mesh import running_mesh
from tests.integration.test_mesh_modes import _stream

pytestmark = pytest.mark.integration

MODEL = "llama3-8b"
TEXT = FaultFreeText(load_scenario("pdd-mini").seed, load_model(MODEL).vocab_size)


def _prompt(n: int, salt: int) -> list[int]:
    return [(i * 7919 + salt * 104729) % 50000 for i in range(n)]


def _check(url: str, prompt: list[int], max_tokens: int) -> dict:
    text, pdd = _stream(url, prompt, max_tokens)
    assert text == TEXT.text(TEXT.ids(prompt, max_tokens)), (max_tokens, pdd)
    assert pdd["rld_tokens"] + pdd["md_tokens"] == max_tokens or pdd["pipeline"] in ("colocated", "P-D")
    return pdd


@pytest.mark.parametrize("scenario,pipeline", [("colocated-mini", "colocated"), ("pd-cross-mini", "P-D")])
def test_baselines_answer_one_to_three_tokens(tmp_path, scenario, pipeline):
    with running_mesh(scenario, tmp_path) as url:
        for max_tokens in (1, 2, 3):
            assert _check(url, _prompt(500, max_tokens), max_tokens)["pipeline"] == pipeline


def test_pdd_answers_one_to_three_tokens_on_both_pipelines(tmp_path):
    with running_mesh("pdd-mini", tmp_path) as url:
        for max_tokens in (1, 2, 3):
            # A short fresh prompt crosses the WAN in milliseconds: P-MD.
            assert _check(url, _prompt(200, 10 + max_tokens), max_tokens)["pipeline"] == "P-MD"
            # 8000 fresh tokens take about 0.85 s over the 10 Gbit/s WAN: P-RLD-MD, and an output this
            # short is over before the KV lands, so it ends on the relay (singular).
            pdd = _check(url, _prompt(8000, 20 + max_tokens), max_tokens)
            assert pdd["policy"]["reason"] and pdd["pipeline"] == "P-RLD" and pdd["singular"], pdd
            assert pdd["rld_tokens"] == max_tokens and not pdd["fallback"]
