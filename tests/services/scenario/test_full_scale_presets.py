"""The report-scale presets: the report's GPU counts, as whole instances that hold the model."""

from __future__ import annotations

import pytest

from services.profiles import load_model
from services.scenario import load_scenario
from services.scenario.sizing import instance_sizing
from services.types import Role

H100_INSTANCE_GPUS = 16  # the smallest power-of-two TP whose HBM holds pdd-paper's 998 GB (docs/simulate.md)


def _gpus(name: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for pool in load_scenario(name).pools:
        out[pool.gpu] = out.get(pool.gpu, 0) + pool.tp * pool.count
    return out


@pytest.mark.parametrize("name", ["paper-full-pd-intra", "paper-full-pd-cross", "paper-full-pdd"])
def test_every_instance_holds_the_model_and_has_kv_room(name):
    scenario = load_scenario(name)
    assert scenario.model == "pdd-paper"
    context = 65536
    for pool in scenario.pools:
        sizing = instance_sizing(scenario, pool)
        assert sizing.kv_capacity_blocks > 0, pool.name
        if pool.role is not Role.PREFILL:  # a decode instance holds a batch of full-context sequences
            assert sizing.kv_capacity_blocks * scenario.engine.block_size // context >= 64, pool.name


def test_the_baseline_is_the_reports_88_gpu_a_in_whole_instances():
    gpus = _gpus("paper-full-pd-intra")
    assert set(gpus) == {"h100-sxm"}
    # 88 is 5.5 H100 instances of this model: the nearest whole counts are 80 and 96, both 8 away
    assert abs(gpus["h100-sxm"] - 88) <= H100_INSTANCE_GPUS // 2
    assert gpus["h100-sxm"] % H100_INSTANCE_GPUS == 0


def test_pdd_is_the_reports_43_a_plus_32_b_and_one_20_gbit_line():
    gpus = _gpus("paper-full-pdd")
    assert gpus["h200-sxm"] == 32
    assert abs(gpus["h100-sxm"] - 43) < H100_INSTANCE_GPUS // 2  # 43 is not whole instances; 48 is nearest
    scenario = load_scenario("paper-full-pdd")
    relay = next(p for p in scenario.pools if p.role is Role.RELAY_DECODE)
    assert relay.tp * relay.count == H100_INSTANCE_GPUS  # the smallest relay that holds the model
    assert scenario.wan.rate_bps == 20e9


def test_cross_dc_pd_has_pdds_prefill_tier_and_b_side():
    cross, pdd = load_scenario("paper-full-pd-cross"), load_scenario("paper-full-pdd")
    pools = {p.role: p for p in cross.pools}
    pdd_pools = {p.role: p for p in pdd.pools}
    assert pools[Role.PREFILL] == pdd_pools[Role.PREFILL]
    assert pools[Role.DECODE].model_dump(exclude={"name", "role"}) == pdd_pools[Role.MAIN_DECODE].model_dump(
        exclude={"name", "role"}
    )
    assert cross.wan == pdd.wan


def test_weights_per_gpu_leave_room_on_every_pool():
    model = load_model("pdd-paper")
    for name in ("paper-full-pd-intra", "paper-full-pdd"):
        scenario = load_scenario(name)
        for pool in scenario.pools:
            weights_per_gpu = instance_sizing(scenario, pool).parallel.weight_bytes(model) / pool.tp
            assert weights_per_gpu < 80e9, pool.name
