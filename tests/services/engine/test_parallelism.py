"""Parallel layouts and collective timing (docs/roofline.md §Parallelism)."""

from __future__ import annotations

import pytest

from services.engine.batch import Chunk, StepBatch
from services.engine.parallelism import Parallelism, allgather_seconds, allreduce_seconds, alltoall_seconds
from services.engine.roofline import RooflineClock
from services.profiles import load_gpu, load_model

PAPER = load_model("pdd-paper")
H100 = load_gpu("h100-sxm")


def test_dp_attention_shards_the_mla_latent_instead_of_replicating_it():
    assert Parallelism(16).kv_replicas(PAPER) == 16
    assert Parallelism(16, dp_attention=16).kv_replicas(PAPER) == 1
    assert Parallelism(16, dp_attention=4).kv_replicas(PAPER) == 4
    assert Parallelism(8).kv_replicas(load_model("llama3-8b")) == 1  # 8 KV heads over 8 GPUs


def test_dp_attention_replicates_attention_weights_and_ep_the_shared_experts():
    base = Parallelism(16).weight_bytes(PAPER)
    assert base == PAPER.weight_bytes
    assert Parallelism(16, dp_attention=16).weight_bytes(PAPER) == base + 15 * 61 * (
        PAPER.attention_params_per_layer + 2 * PAPER.hidden_size)
    assert Parallelism(16, ep=16).weight_bytes(PAPER) > base


@pytest.mark.parametrize("bad", [dict(tp=16, dp_attention=3), dict(tp=16, ep=4), dict(tp=0)])
def test_impossible_layouts_are_refused(bad):
    with pytest.raises(ValueError):
        Parallelism(**bad)


def test_ep_needs_an_moe_model():
    with pytest.raises(ValueError, match="MoE"):
        Parallelism(8, ep=8).check(load_model("llama3-8b"))


def test_collectives_inside_a_node_ride_nvlink_and_across_nodes_the_nics():
    payload = 117e6
    inside = allreduce_seconds(H100, 8, payload)
    assert inside == pytest.approx(H100.allreduce_latency_s.value + 2 * 7 / 8 * payload / 450e9)
    across = allreduce_seconds(H100, 16, payload)
    nic = H100.nic_bandwidth_bps / 8
    assert across == pytest.approx(H100.nic_latency_s.value + 2 * 7 / 8 * payload / 450e9 + 2 * 0.5 * payload / 8 / nic)
    assert across > inside
    assert allgather_seconds(H100, 16, payload) < across
    assert alltoall_seconds(H100, 8, payload) < alltoall_seconds(H100, 16, payload)
    assert allreduce_seconds(H100, 1, payload) == 0.0


def test_tp16_pays_for_crossing_nodes():
    batch = StepBatch(chunks=(Chunk(8192),))
    tp16 = RooflineClock(H100, PAPER, tp=16).predict(batch)
    nvlink_only = H100.model_copy(update={"gpus_per_node": 16})
    assert tp16.seconds > RooflineClock(nvlink_only, PAPER, tp=16).predict(batch).seconds


def test_dp_attention_splits_decode_attention_across_ranks():
    batch = StepBatch(decode_contexts=(65536,) * 256)
    tp = RooflineClock(H100, PAPER, tp=16).predict(batch)
    dp = RooflineClock(H100, PAPER, tp=16, dp_attention=16).predict(batch)
    assert dp.seconds < tp.seconds


def test_ep_reads_fewer_expert_weights_per_gpu_and_pays_all_to_all():
    batch = StepBatch(chunks=(Chunk(8192),))
    tp = RooflineClock(H100, PAPER, tp=16, dp_attention=16).predict(batch)
    ep = RooflineClock(H100, PAPER, tp=16, dp_attention=16, ep=16).predict(batch)
    assert ep.seconds < tp.seconds
    # the same expert work laid out differently; only the router stops being computed on every GPU
    assert ep.flops < tp.flops and ep.flops == pytest.approx(tp.flops, rel=0.1)


def test_redundant_experts_fill_any_ep_and_their_weights_count():
    v3 = load_model("deepseek-v3")
    assert Parallelism(72, dp_attention=72, ep=72).expert_slots(v3) == 4  # 256 + 32 redundant = 288
    assert Parallelism(32, ep=32, redundant_experts=32).expert_slots(v3) == 9
    with pytest.raises(ValueError, match="redundant"):
        Parallelism(72, ep=72, redundant_experts=5).check(v3)
    plain, replicated = Parallelism(32, ep=32).weight_bytes(v3), Parallelism(32, ep=32, redundant_experts=32)
    assert replicated.weight_bytes(v3) - plain == 32 * v3.moe_layers * v3.expert_params


def test_dense_data_parallel_copies_dense_layers_and_head_to_every_gpu():
    v3 = load_model("deepseek-v3")
    extra = Parallelism(8, 8, 8, dense_dp=True).weight_bytes(v3) - Parallelism(8, 8, 8).weight_bytes(v3)
    assert extra == 7 * (v3.dense_layers * v3.dense_mlp_params + v3.embedding_params)


def test_imbalance_below_one_is_refused():
    with pytest.raises(ValueError, match="imbalance"):
        Parallelism(8, ep=8, expert_imbalance=0.9)
