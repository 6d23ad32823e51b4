"""The screen: stage capacities from the roofline and the engines' sizing, and the stage that binds a knee."""

from __future__ import annotations

import pytest

from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.plan.candidate import Candidate, PddKnobs, Pool
from services.plan.outputs import plain_words
from services.plan.screen import screen
from services.plan.space import candidates
from services.plan.spec import LineOffer, SPECS, load_spec
from services.plan.stages import Layout, capacity, layouts
from services.plan.workload import sample_workload
from services.types import Role

MINI = str(SPECS / "mini.yaml")
H100, H200 = Layout("h100-sxm", 1), Layout("h200-sxm", 1)


@pytest.fixture(scope="module")
def spec():
    return load_spec(MINI)


@pytest.fixture(scope="module")
def sample(spec):
    return sample_workload(spec.workload)


def test_decode_slots_are_the_most_whose_step_fits_the_tpot_limit():
    cap = capacity("llama3-8b", H200, 8192, 4000, 5000, 200, 0.02)
    clock = RooflineClock.for_names("h200-sxm", "llama3-8b")
    step = lambda n: clock.step_seconds(StepBatch(decode_contexts=(5000,) * n))  # noqa: E731
    assert 0 < cap.decode_slots and step(cap.decode_slots) <= 0.02
    kv_bound = cap.kv_tokens // (5000 + 100)
    assert cap.decode_slots == kv_bound or step(cap.decode_slots + 1) > 0.02
    assert capacity("llama3-8b", H200, 8192, 4000, 5000, 200, 0.1).decode_slots >= cap.decode_slots


def test_layouts_keep_only_those_that_fit():
    degrees = [layout.tp for layout in layouts("llama3-8b", "h100-sxm")]
    assert degrees[:4] == [1, 2, 4, 8] and all(tp & (tp - 1) == 0 for tp in degrees)
    assert min(layout.tp for layout in layouts("pdd-paper", "h100-sxm")) == 16  # 1 TB of fp8 weights


def _pd_cross(line_gbps: float, decode: int = 2) -> Candidate:
    return Candidate("pd-cross", (Pool(Role.PREFILL, "dc-a", H100, 2), Pool(Role.DECODE, "dc-b", H200, decode)), 8192,
                     LineOffer(rate=line_gbps * 1e9, price_per_hour=1.0))


def test_a_thin_line_binds_and_a_wider_one_lifts_the_knee(spec, sample):
    thin, wide = screen(_pd_cross(2), spec, sample), screen(_pd_cross(100), spec, sample)
    assert thin.binding_stage == "line" and thin.utilisation["line"] > thin.utilisation["decode"]
    assert wide.goodput_rps > thin.goodput_rps and wide.binding_stage != "line"


def test_more_of_the_binding_stage_raises_the_goodput(spec, sample):
    one = screen(_pd_cross(100, decode=1), spec, sample)
    assert one.binding_stage == "decode"
    assert screen(_pd_cross(100, decode=3), spec, sample).goodput_rps > one.goodput_rps


def test_pdd_relays_what_the_line_delays_and_the_relay_is_searched(spec, sample):
    pools = (Pool(Role.PREFILL, "dc-a", H100, 2), Pool(Role.RELAY_DECODE, "dc-a", H100, 1),
             Pool(Role.MAIN_DECODE, "dc-b", H200, 2))
    pdd = screen(Candidate("pdd", pools, 8192, LineOffer(rate=5e9, price_per_hour=1.0), PddKnobs()), spec, sample)
    assert pdd.utilisation["relay"] > 0
    relays = {c.pool(Role.RELAY_DECODE).count for c in candidates(spec.model_copy(update={"budget_per_hour": 30}),
                                                                    sample, "pdd")}
    assert relays == {1, 2}


def test_plain_words_name_the_winner_why_and_whether_pdd_pays():
    arch = {"goodput_rps": 10.0, "goodput_ci": [9.0, 11.0], "cost_per_hour": 10.0, "deployment": "x",
            "binding_stage": "decode", "bcr": 1.0}
    data = {"winner": "pd-intra", "tie": [], "architectures": {
        "pd-intra": arch, "pdd": {**arch, "goodput_rps": 5.0, "bcr": 0.5, "binding_stage": "relay"}}}
    lines = plain_words(data)
    assert 3 <= len(lines) <= 4 and "pd-intra" in lines[0] and "decode" in lines[1]
    assert "100% more goodput per dollar" in lines[1] and lines[-1].startswith("PDD does not pay here: its relay")
    tied = plain_words({**data, "tie": ["pd-intra", "pdd"]})
    assert any("tie" in line for line in tied)
