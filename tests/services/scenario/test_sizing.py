"""Instance sizing from a scenario: KV blocks, host tier and running cap (docs/engine.md, "Capacity")."""

import pytest

from services.profiles import load_gpu, load_model
from services.scenario import ScenarioError, load_scenario
from services.scenario.sizing import instance_sizing


def decode_pool(scenario):
    return next(p for p in scenario.pools if p.name == "decode")


def test_dp_attention_holds_the_mla_latent_once_per_group():
    plain = load_scenario("paper-pd-intra")
    dp = load_scenario("paper-pd-intra", ["pools.decode.dp_attention=16"])
    blocks = instance_sizing(plain, decode_pool(plain)).kv_capacity_blocks
    dp_blocks = instance_sizing(dp, decode_pool(dp)).kv_capacity_blocks
    gpu, model = load_gpu("h100-sxm"), load_model("pdd-paper")
    spare = 16 * gpu.hbm_bytes * 0.9 - model.weight_bytes
    assert blocks == int(spare // (model.kv_bytes_per_token * 16 * 16))  # the latent on all 16 GPUs
    attention_copies = 15 * 61 * (model.attention_params_per_layer + 2 * model.hidden_size)  # fp8: 1 byte each
    assert dp_blocks == int((spare - attention_copies) // (model.kv_bytes_per_token * 16))  # held once
    assert dp_blocks > 4 * blocks


def test_the_host_tier_defaults_to_half_the_dram_of_the_servers_an_instance_spans():
    scenario = load_scenario("paper-pd-intra")
    sizing = instance_sizing(scenario, decode_pool(scenario))  # 16 GPUs: two 2 TiB servers
    assert sizing.host_cache_blocks == int(2 * 2**41 * 0.5 // (load_model("pdd-paper").kv_bytes_per_token * 16))
    off = load_scenario("paper-pd-intra", ["engine.host_cache_bytes=0"])
    assert instance_sizing(off, decode_pool(off)).host_cache_blocks == 0
    sized = load_scenario("paper-pd-intra", ["engine.host_cache_bytes=1GiB"])
    assert instance_sizing(sized, decode_pool(sized)).host_cache_blocks == 2**30 // (4392 * 16)


def test_the_running_cap_is_the_scenarios_or_derived_from_memory():
    assert instance_sizing(load_scenario("paper-pd-intra"), decode_pool(load_scenario("paper-pd-intra"))).max_running == 48
    mini = load_scenario("pd-intra-mini")
    assert instance_sizing(mini, decode_pool(mini)).max_running >= 2048  # SGLang's floor


@pytest.mark.parametrize("override, message", [
    ("pools.decode.dp_attention=3", "must divide"),
    ("pools.decode.ep=4", "ep=4"),
])
def test_bad_layouts_name_the_problem(override, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario("paper-pd-intra", [override])


def test_ep_on_a_dense_model_is_refused():
    with pytest.raises(ScenarioError, match="MoE"):
        load_scenario("pd-intra-mini", ["pools.decode.tp=2", "pools.decode.ep=2"])
