"""vLLM's per-replica series from an engine's own steps: tokens per step and the cache's config."""

from __future__ import annotations

from services.engine import vllm_series
from tests.services.engine.conftest import collect, fresh, prompt


async def test_each_step_lands_in_vllms_token_bucket_and_the_sum_is_every_token(make_engine):
    engine = await make_engine()
    await collect(engine.submit(fresh("r", prompt(40), generate=3)))
    stats = engine.stats()
    family = vllm_series.iteration_tokens(["pool"], [(["p"], stats)])
    samples = {(s.name, s.labels.get("le")): s.value for s in family.samples}
    # one step of 40 prompt tokens (and the first output token), then two decode steps of one token
    assert samples[("vllm:iteration_tokens_total_bucket", "1.0")] == 2
    assert samples[("vllm:iteration_tokens_total_bucket", "32.0")] == 2
    assert samples[("vllm:iteration_tokens_total_bucket", "64.0")] == 3
    assert samples[("vllm:iteration_tokens_total_bucket", "+Inf")] == 3 == stats.steps
    assert samples[("vllm:iteration_tokens_total_sum", None)] == 42


async def test_cache_config_info_is_one_with_the_caches_shape_in_its_labels(make_engine):
    engine = await make_engine(kv_capacity_blocks=512)
    family = vllm_series.cache_config(["pool"], [(["p"], engine.stats())], block_size=16)
    (sample,) = family.samples
    assert sample.value == 1.0 and sample.labels == {
        "pool": "p", "engine": "0", "block_size": "16", "num_gpu_blocks": "512", "num_cpu_blocks": "0",
        "enable_prefix_caching": "True"}
