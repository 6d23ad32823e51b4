from __future__ import annotations

import pytest

from services.engine.batch import Chunk, StepBatch
from services.engine.layer_shapes import layer_shapes
from services.engine.roofline import RooflineClock
from services.profiles import load_model
from services.types import LaunchStyle


def test_expert_parallel_fp8_prefill_quantises_each_gemm_input_and_permutes_the_routed_copies():
    shapes = layer_shapes(load_model("deepseek-v3"), 32, attention_tp=1, ep=32, dense_dp=True)
    extra = shapes.contiguous_prefill
    quant = 2 + 1 + 4 / 128  # read bf16, write fp8 and one fp32 scale per 128 values
    # inputs of q_a and kv_a (one hidden state), q_b, kv_b and o_proj
    assert extra.attention_bytes_per_token == pytest.approx((7168 + 1536 + 512 + 128 * 128) * quant)
    routed_copies = 8 * 7168 * (1 + 4 / 128)  # fp8 rows and scales, read and written once each
    # pre-dispatch hidden state, shared expert gate-up and down inputs, each routed copy's down input
    assert extra.moe_bytes_per_token == pytest.approx((7168 + 7168 + 2048 + 8 * 2048) * quant + 2 * routed_copies)
    assert (extra.attention_kernels, extra.moe_kernels) == (4, 5)


def test_layouts_without_normal_dispatch_add_no_quantisation_kernels():
    assert layer_shapes(load_model("deepseek-v3"), 8).contiguous_prefill is None  # experts tensor-parallel
    assert layer_shapes(load_model("llama3-70b"), 4).contiguous_prefill is None  # dense bf16


def test_the_clock_charges_them_to_prefill_steps_only():
    clock = RooflineClock.for_names("h100-sxm", "deepseek-v3", tp=32, dp_attention=32, ep=32, dense_dp=True)
    batch = StepBatch(chunks=(Chunk(4096),) * 64)
    eager, graph = clock.predict(batch), clock.predict(batch, launch_style=LaunchStyle.CUDA_GRAPH)
    extra = layer_shapes(load_model("deepseek-v3"), 32, attention_tp=1, ep=32, dense_dp=True).contiguous_prefill
    local_tokens = 64 * 4096 / 32
    expected = local_tokens * (61 * extra.attention_bytes_per_token + 58 * extra.moe_bytes_per_token)
    # the low-latency path fuses quantisation into dispatch and activation: nothing else differs in bytes
    assert eager.bytes - graph.bytes == pytest.approx(expected)
