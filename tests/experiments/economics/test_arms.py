"""The deployments and iso-cost arms: derived from the report-scale presets, with the costs docs/simulate.md gives."""

from __future__ import annotations

import pytest

from services.experiments.economics.arms import ARMS, DEPLOYMENTS, arm
from services.scenario import load_scenario
from services.scenario.cost import cost_per_hour, gpu_count
from services.types import Role
from tests.tolerance import assert_close

# $/h from docs/simulate.md's table (H100 2.99, H200 3.79, line 4.50)
COST = {"baseline": 287.04, "pdd-b-tp8": 269.30, "pdd-b-tp16-dp": 269.30, "pd-cross-b": 221.46}


@pytest.mark.parametrize("key", list(COST))
def test_each_arm_costs_what_its_gpus_and_line_cost(key):
    assert_close(cost_per_hour(arm(key).scenario()), COST[key], rel=1e-6, what=f"{key} $/h")


def test_pdd_arms_change_only_main_decode_on_the_same_b_gpus():
    tp8, tp16 = arm("pdd-b-tp8").scenario(), arm("pdd-b-tp16-dp").scenario()
    md8, md16 = tp8.pools_with(Role.MAIN_DECODE)[0], tp16.pools_with(Role.MAIN_DECODE)[0]
    assert (md8.tp, md8.dp_attention, md8.count) == (8, 1, 4)
    assert (md16.tp, md16.dp_attention, md16.count) == (16, 16, 2)
    assert gpu_count(tp8) == gpu_count(tp16) == 80
    others = lambda s: [p for p in s.pools if p.role is not Role.MAIN_DECODE]  # noqa: E731
    assert others(tp8) == others(tp16)


def test_cross_dc_arm_is_pdd_without_its_relay():
    pdd, cross = load_scenario(DEPLOYMENTS["pdd"]), arm("pd-cross-b").scenario()
    relay = pdd.pools_with(Role.RELAY_DECODE)[0]
    assert_close(cost_per_hour(pdd) - cost_per_hour(cross), relay.count * relay.tp * 2.99, rel=1e-6)


def test_unknown_arm_is_named():
    with pytest.raises(KeyError, match="choose one of"):
        arm("pdd-b-tp4")


def test_arm_keys_are_unique():
    assert len({a.key for a in ARMS}) == len(ARMS)
