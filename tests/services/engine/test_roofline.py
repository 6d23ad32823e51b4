"""The step clock against the measured H200 layer rows, and its bookkeeping."""

from __future__ import annotations

import pytest

from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock, StepPrediction
from services.engine.roofline_fit import measured_layer_model
from services.profiles import SHIPPED_H200_MEASUREMENTS, load_gpu, load_model
from services.profiles.measurement import GRAPH_LAYERS, read_measurements
from services.types import LaunchStyle
from tests.tolerance import assert_at_most, assert_close

MEASURED = read_measurements(SHIPPED_H200_MEASUREMENTS)


@pytest.fixture(scope="module")
def one_layer() -> RooflineClock:
    return RooflineClock.for_names("h200-sxm", "llama3-8b", layers=1)


def test_one_layer_prefill_of_8192_is_within_10_percent_of_the_measured_6_43_ms(one_layer):
    seconds = one_layer.step_seconds(StepBatch(chunks=(Chunk(8192),)))
    assert_close(seconds, 6.433e-3, rel=0.10, what="one Llama-3-8B layer, 8192-token prefill")


@pytest.mark.parametrize("row", MEASURED.layer_prefill_eager, ids=lambda r: f"T={r.tokens}")
def test_prefill_layer_rows(one_layer, row):
    predicted = one_layer.step_seconds(StepBatch(chunks=(Chunk(row.tokens),)))
    assert_close(predicted, row.seconds, rel=0.25, what=f"prefill T={row.tokens}")


@pytest.mark.parametrize("row", MEASURED.layer_extend, ids=lambda r: f"T={r.new_tokens}")
def test_extend_layer_rows(one_layer, row):
    predicted = one_layer.step_seconds(StepBatch(chunks=(Chunk(row.new_tokens, row.context),)))
    assert_close(predicted, row.seconds, rel=0.2, what=f"extend T={row.new_tokens}")


@pytest.mark.parametrize("row", MEASURED.layer_decode_cuda_graph, ids=lambda r: f"B={r.batch},C={r.context}")
def test_cuda_graph_decode_layer_rows(row):
    # the measurement replays a graph of 8 layers and divides by 8
    clock = RooflineClock(load_gpu("h200-sxm"), measured_layer_model(MEASURED), layers=GRAPH_LAYERS)
    predicted = clock.step_seconds(StepBatch(decode_contexts=(row.context + 1,) * row.batch)) / GRAPH_LAYERS
    assert_close(predicted, row.seconds, rel=0.1, what=f"graph decode B={row.batch} C={row.context}")


@pytest.mark.parametrize("row", MEASURED.layer_decode_eager, ids=lambda r: f"B={r.batch},C={r.context}")
def test_eager_decode_layer_rows(one_layer, row):
    batch = StepBatch(decode_contexts=(row.context + 1,) * row.batch)
    predicted = one_layer.step_seconds(batch, launch_style=LaunchStyle.EAGER)
    assert_close(predicted, row.seconds, rel=0.35, what=f"eager decode B={row.batch} C={row.context}")


def test_predict_agrees_with_the_fast_path():
    clock = RooflineClock.for_names("h200-sxm", "deepseek-v3", tp=8)
    for batch in (
        StepBatch(chunks=(Chunk(512, 3000), Chunk(77)), decode_contexts=(100, 5000, 65000)),
        StepBatch(decode_contexts=(4096,) * 32),
        StepBatch(chunks=(Chunk(8192),)),
    ):
        prediction = clock.predict(batch)
        assert isinstance(prediction, StepPrediction)
        assert_close(prediction.seconds, clock.step_seconds(batch), rel=1e-12, what="predict vs step_seconds")
        assert_close(prediction.seconds, prediction.compute_s + prediction.memory_s + prediction.overhead_s, rel=1e-12)


def test_launch_style_follows_the_batch():
    clock = RooflineClock.for_names("h200-sxm", "llama3-8b")
    assert clock.predict(StepBatch(decode_contexts=(10,))).launch_style is LaunchStyle.CUDA_GRAPH
    assert clock.predict(StepBatch(chunks=(Chunk(1),))).launch_style is LaunchStyle.EAGER
    decode = StepBatch(decode_contexts=(1000,) * 8)
    assert clock.step_seconds(decode, LaunchStyle.EAGER) > clock.step_seconds(decode)


def test_bounds_name_the_dominant_cost():
    clock = RooflineClock.for_names("h200-sxm", "llama3-8b")
    assert clock.predict(StepBatch(chunks=(Chunk(16384),))).bound == "compute"
    assert clock.predict(StepBatch(decode_contexts=(8192,) * 64)).bound == "memory"
    tiny = RooflineClock.for_names("h200-sxm", "llama3-8b", layers=1)
    assert tiny.predict(StepBatch(chunks=(Chunk(1),))).bound == "overhead"


def test_an_empty_step_takes_no_time():
    clock = RooflineClock.for_names("h200-sxm", "llama3-8b")
    assert clock.step_seconds(StepBatch()) == 0.0
    assert clock.predict(StepBatch()).seconds == 0.0


def test_flops_of_a_prefill_match_the_model_count():
    model = load_model("llama3-8b")
    clock = RooflineClock(load_gpu("h200-sxm"), model)
    tokens = 4096
    # every token multiplies the non-embedding weights; the LM head runs on the last token only
    lm_head = 2 * model.hidden_size * model.vocab_size
    expected = tokens * (model.matmul_flops_per_token - lm_head) + lm_head
    expected += model.num_layers * 4 * model.num_attention_heads * model.head_dim * tokens * (tokens + 1) / 2
    assert_close(clock.predict(StepBatch(chunks=(Chunk(tokens),))).flops, expected, rel=1e-3, what="FLOPs")


def test_layers_override_drops_the_lm_head():
    full = RooflineClock.for_names("h200-sxm", "llama3-8b")
    layers = RooflineClock.for_names("h200-sxm", "llama3-8b", layers=32)
    decode = StepBatch(decode_contexts=(1024,) * 16)
    head_weight_bytes = 128256 * 4096 * 2
    assert full.predict(decode).bytes - layers.predict(decode).bytes > head_weight_bytes


def test_decode_reads_every_weight_once():
    model = load_model("llama3-70b")
    prediction = RooflineClock(load_gpu("h200-sxm"), model).predict(StepBatch(decode_contexts=(1,)))
    embedding_bytes = model.vocab_size * model.hidden_size * 2  # a gather reads one row, not the table
    assert_close(prediction.bytes, model.weight_bytes - embedding_bytes, rel=0.01, what="decode HBM bytes")


def test_a_full_model_decode_step_is_in_a_plausible_range():
    # Llama-3-8B, batch 1: 16 GB of weights at a few TB/s, plus launch costs
    seconds = RooflineClock.for_names("h200-sxm", "llama3-8b").step_seconds(StepBatch(decode_contexts=(1000,)))
    assert 3.5e-3 < seconds < 8e-3


def test_tensor_parallel_degree_must_split_the_heads():
    with pytest.raises(ValueError, match="use one of 1, 2, 4, 8"):
        RooflineClock.for_names("h200-sxm", "llama3-70b", tp=3)


def test_layers_outside_the_model_are_refused():
    with pytest.raises(ValueError, match="1..32"):
        RooflineClock.for_names("h200-sxm", "llama3-8b", layers=33)


def test_slower_cards_take_longer():
    prefill, decode = StepBatch(chunks=(Chunk(4096),)), StepBatch(decode_contexts=(4096,) * 32)
    h200, h20 = (RooflineClock.for_names(g, "llama3-8b") for g in ("h200-sxm", "h20"))
    h100 = RooflineClock.for_names("h100-sxm", "llama3-8b")
    assert h20.step_seconds(prefill) > 4 * h200.step_seconds(prefill), "H20 has a seventh of the compute"
    assert h100.step_seconds(decode) > h200.step_seconds(decode), "H100 has less bandwidth"
    assert_at_most(h20.step_seconds(decode) / h200.step_seconds(decode), 1.5, what="H20 decode is not far behind")
