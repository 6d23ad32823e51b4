"""Model profiles: sizes derived from the architecture agree with the published configs."""

from __future__ import annotations

import pytest

from services.profiles import UnknownProfileError, load_model, model_names
from services.profiles.model import ModelProfile
from tests.tolerance import assert_close

# published totals (model cards / configs), parameters
PUBLISHED_PARAMS = {
    "llama3-8b": (8.03e9, 8.03e9),
    "llama3-70b": (70.55e9, 70.55e9),
    "qwen2.5-72b": (72.7e9, 72.7e9),
    "deepseek-v3": (671e9, 37e9),  # without the 14B MTP module
}

# layers x 2 (K and V) x KV heads x head dim x 2 bytes; MLA: layers x (kv_lora_rank + rope dim) x bytes
EXACT_KV_BYTES_PER_TOKEN = {
    "llama3-8b": 32 * 2 * 8 * 128 * 2,
    "llama3-70b": 80 * 2 * 8 * 128 * 2,
    "qwen2.5-72b": 80 * 2 * 8 * 128 * 2,
    "deepseek-v3": (512 + 64) * 61 * 2,
    "pdd-paper": (512 + 64) * 61 * 1 // 8,
    "pdd-paper-kv46k": (698 + 64) * 61 * 1,  # the article's 4649 KB per 100-token handoff
}


def test_the_required_models_are_shipped():
    assert set(EXACT_KV_BYTES_PER_TOKEN) <= set(model_names())


@pytest.mark.parametrize("name", sorted(EXACT_KV_BYTES_PER_TOKEN))
def test_kv_bytes_per_token_are_exact(name):
    assert load_model(name).kv_bytes_per_token == EXACT_KV_BYTES_PER_TOKEN[name]


def test_llama_kv_bytes_in_kib():
    assert load_model("llama3-8b").kv_bytes_per_token == 128 * 1024
    assert load_model("llama3-70b").kv_bytes_per_token == 320 * 1024


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_parameter_counts_match_published_configs(name):
    total, active = PUBLISHED_PARAMS[name]
    model = load_model(name)
    assert_close(model.total_params, total, rel=0.015, what=f"{name} total parameters")
    assert_close(model.active_params, active, rel=0.02, what=f"{name} active parameters")


def test_pdd_paper_model_holds_about_23_gb_for_80_requests_of_64k():
    model = load_model("pdd-paper")
    assert_close(80 * 65536 * model.kv_bytes_per_token, 23e9, rel=0.05, what="KV of 80 x 64K tokens")
    assert 4000 <= model.kv_bytes_per_token <= 4700
    assert model.total_params > 0.9e12, "a 1T-class MoE"


@pytest.mark.parametrize("name", sorted(EXACT_KV_BYTES_PER_TOKEN))
def test_every_model_exposes_what_the_engine_needs(name):
    model = load_model(name)
    assert model.name == name
    assert model.max_context >= 32768 and model.vocab_size > 0 and model.num_layers > 0
    assert model.weight_bytes == model.total_params * {"bf16": 2, "fp8": 1}[model.dtype]
    assert model.active_params <= model.total_params


def test_dense_models_activate_every_parameter_and_moe_models_few():
    assert load_model("llama3-70b").active_params == load_model("llama3-70b").total_params
    deepseek = load_model("deepseek-v3")
    assert deepseek.active_params < 0.07 * deepseek.total_params


def test_flops_per_token_are_twice_the_multiplied_parameters_plus_attention():
    model = load_model("llama3-8b")
    assert model.flops_per_token() == 2 * (model.total_params - model.vocab_size * model.hidden_size)
    # 4 x heads x head_dim FLOPs per cached token and layer
    assert model.flops_per_token(1000) - model.flops_per_token() == 32 * 4 * 32 * 128 * 1000


def test_unknown_model_names_every_valid_one():
    with pytest.raises(UnknownProfileError) as caught:
        load_model("gpt-5")
    assert isinstance(caught.value, ValueError)
    for name in model_names():
        assert name in str(caught.value)


def test_tensor_parallel_degrees_split_heads_evenly():
    assert load_model("llama3-8b").tensor_parallel_degrees() == [1, 2, 4, 8, 16, 32]
    assert 3 not in load_model("deepseek-v3").tensor_parallel_degrees()


def test_a_gqa_model_without_kv_heads_is_rejected():
    with pytest.raises(ValueError, match="num_kv_heads"):
        ModelProfile(name="broken", description="", num_layers=2, hidden_size=64, num_attention_heads=4,
                     intermediate_size=128, vocab_size=10, max_context=1024, dtype="bf16")


def test_profiles_are_frozen():
    with pytest.raises(ValueError):
        load_model("llama3-8b").num_layers = 3
