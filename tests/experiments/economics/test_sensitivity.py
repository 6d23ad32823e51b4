"""Every sensitivity case changes what it names, and the tornado puts the widest swing first."""

from __future__ import annotations

import pytest

from loadgen.spec import parse_spec
from services.experiments.economics.arms import DEPLOYMENTS
from services.experiments.economics.sensitivity import PARAMETERS, tornado, with_option
from services.profiles import load_model
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour

WORKLOAD = "agentic:context=64K,output=512..1K"
CASES = [(p.name, side, case) for p in PARAMETERS for side, case in (("low", p.low), ("high", p.high)) if case]


def _changed(case, key: str):
    base = load_scenario(DEPLOYMENTS[key])
    return base, load_scenario(DEPLOYMENTS[key], case.scenario_overrides(base))


@pytest.mark.parametrize("name,side,case", CASES, ids=[f"{n}-{s}" for n, s, _ in CASES])
def test_each_case_changes_the_scenario_or_workload_it_names(name, side, case):
    base, pdd = _changed(case, "pdd")
    if case.workload_option:
        assert parse_spec(case.workload(WORKLOAD)) != parse_spec(WORKLOAD)
        assert pdd == base
        return
    assert pdd != base  # every scenario case applies to PDD
    if name == "KV bytes per token":
        assert load_model(pdd.model).kv_bytes_per_token == 46482 and load_model(base.model).kv_bytes_per_token == 4392
    if name in ("GPU-B price premium", "line price"):
        assert cost_per_hour(pdd) != cost_per_hour(base)
        assert _changed(case, "pd-intra")[1] == _changed(case, "pd-intra")[0]  # the baseline has no B side or line
    if name == "WAN connection window":
        window = {"low": 3 * 2**19, "high": 3 * 2**20}[side]
        assert pdd.wan.window_bytes == window and base.wan.window_bytes is None
        assert _changed(case, "pd-cross")[1].wan.window_bytes == window
        assert _changed(case, "pd-intra")[1] == _changed(case, "pd-intra")[0]  # no line to limit


def test_gpu_b_premium_sets_the_b_price_from_the_a_price():
    parameter = next(p for p in PARAMETERS if p.name == "GPU-B price premium")
    base, low = _changed(parameter.low, "pdd")
    _, high = _changed(parameter.high, "pdd")
    b_gpus = 32
    assert cost_per_hour(low) - cost_per_hour(base) == pytest.approx(b_gpus * (2.99 * 1.2 - 3.79), rel=1e-3)
    assert cost_per_hour(high) > cost_per_hour(base) > cost_per_hour(low)


def test_with_option_replaces_the_specs_own_value():
    assert with_option(WORKLOAD, "output=1..2") == "agentic:context=64K,output=1..2"
    assert with_option("agentic", "output=5") == "agentic:output=5"


def test_tornado_orders_by_the_widest_swing():
    bars = tornado(0.3, {"line price": (0.29, 0.31), "KV bytes per token": (-0.2, None),
                         "output length": (0.1, 0.45)})
    assert [b.parameter for b in bars] == ["KV bytes per token", "output length", "line price"]
    assert bars[0].high is None and bars[0].swing(0.3) == pytest.approx(0.5)
