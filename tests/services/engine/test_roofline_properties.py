"""Properties any step clock must have: more work is never faster, splitting it helps big steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock
from services.engine.roofline_ops import expected_distinct_experts

CLOCKS = {
    name: RooflineClock.for_names("h200-sxm", name, tp=tp)
    for name, tp in (("llama3-8b", 1), ("llama3-70b", 4), ("deepseek-v3", 8), ("pdd-paper", 8))
}
models = st.sampled_from(sorted(CLOCKS))
tokens = st.integers(min_value=1, max_value=16384)
contexts = st.integers(min_value=1, max_value=65536)


@settings(max_examples=60, deadline=None)
@given(models, tokens, st.integers(min_value=0, max_value=32768), st.integers(min_value=1, max_value=4096))
def test_more_new_tokens_are_never_faster(model, new, cached, extra):
    clock = CLOCKS[model]
    assert clock.step_seconds(StepBatch(chunks=(Chunk(new + extra, cached),))) >= clock.step_seconds(
        StepBatch(chunks=(Chunk(new, cached),))
    )


@settings(max_examples=60, deadline=None)
@given(models, tokens, contexts, st.integers(min_value=1, max_value=16384))
def test_a_longer_cached_prefix_is_never_faster(model, new, cached, extra):
    clock = CLOCKS[model]
    shorter = clock.step_seconds(StepBatch(chunks=(Chunk(new, cached),)))
    assert clock.step_seconds(StepBatch(chunks=(Chunk(new, cached + extra),))) >= shorter


@settings(max_examples=60, deadline=None)
@given(models, st.lists(contexts, min_size=1, max_size=64), contexts)
def test_one_more_decoding_sequence_is_never_faster(model, decodes, another):
    clock = CLOCKS[model]
    before = clock.step_seconds(StepBatch(decode_contexts=tuple(decodes)))
    assert clock.step_seconds(StepBatch(decode_contexts=(*decodes, another))) >= before


@settings(max_examples=40, deadline=None)
@given(models, st.lists(contexts, min_size=0, max_size=32), tokens)
def test_adding_a_chunk_to_a_decode_step_is_never_faster(model, decodes, new):
    clock = CLOCKS[model]
    before = clock.step_seconds(StepBatch(decode_contexts=tuple(decodes)))
    assert clock.step_seconds(StepBatch(chunks=(Chunk(new),), decode_contexts=tuple(decodes))) > before


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=4096, max_value=65536))
def test_tp2_is_faster_than_tp1_for_big_prefills(prompt_tokens):
    batch = StepBatch(chunks=(Chunk(prompt_tokens),))
    for model in ("llama3-8b", "llama3-70b", "qwen2.5-72b"):
        tp1, tp2 = (RooflineClock.for_names("h200-sxm", model, tp=tp) for tp in (1, 2))
        assert tp2.step_seconds(batch) < tp1.step_seconds(batch)


def test_tp_splits_flops_between_gpus():
    batch = StepBatch(chunks=(Chunk(8192),))
    tp1, tp8 = (RooflineClock.for_names("h200-sxm", "llama3-70b", tp=tp) for tp in (1, 8))
    assert 7 < tp1.predict(batch).flops / tp8.predict(batch).flops <= 8


@given(st.integers(min_value=1, max_value=4096))
def test_expected_distinct_experts_stays_between_k_and_all(tokens):
    touched = expected_distinct_experts(256, 8, tokens)
    assert 8 - 1e-9 <= touched <= 256
    assert touched <= min(256, 8 * tokens) + 1e-9


def test_small_moe_batches_read_fewer_expert_weights():
    assert expected_distinct_experts(256, 8, 1) == 8
    assert expected_distinct_experts(256, 8, 16) < 120 < expected_distinct_experts(256, 8, 64) < 256
    clock = RooflineClock.for_names("h200-sxm", "deepseek-v3", tp=8)
    one, many = (clock.predict(StepBatch(decode_contexts=(1024,) * b)).bytes for b in (1, 256))
    assert many > 5 * one, "256 tokens touch nearly every expert, one token touches 8 of 256"
