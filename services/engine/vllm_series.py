"""The per-replica series a vLLM dashboard reads that are not plain counters or gauges.

`vllm:iteration_tokens_total` is vLLM's histogram of the tokens one engine step
computes (prefill chunks plus one token per decoding sequence), with vLLM's
buckets (ITERATION_TOKEN_BUCKETS). `vllm:cache_config_info` is vLLM's info-style
gauge, always 1, whose labels describe the KV cache: its block size, its device
blocks (`num_gpu_blocks`) and its host-memory blocks (`num_cpu_blocks`), and
that prefix caching is on. Both carry the replica's labels (services/instances.py)
and vLLM's `engine` index, the replica's number within its pool.
"""

from __future__ import annotations

from itertools import accumulate

from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString

from services.engine.scheduler import ITERATION_TOKEN_BUCKETS, EngineStats

_BOUNDS = [floatToGoString(b) for b in ITERATION_TOKEN_BUCKETS] + ["+Inf"]


def iteration_tokens(labels: list[str], rows: list[tuple[list[str], EngineStats]]) -> HistogramMetricFamily:
    family = HistogramMetricFamily("vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.",
                                   labels=labels)
    for values, stats in rows:
        cumulative = list(accumulate(stats.iteration_tokens))
        family.add_metric(values, list(zip(_BOUNDS, cumulative)), sum_value=stats.iteration_tokens_sum)
    return family


CACHE_CONFIG_LABELS = ["engine", "block_size", "num_gpu_blocks", "num_cpu_blocks", "enable_prefix_caching"]


def cache_config(labels: list[str], rows: list[tuple[list[str], EngineStats]], block_size: int) -> GaugeMetricFamily:
    family = GaugeMetricFamily("vllm:cache_config_info", "Information of the LLMEngine CacheConfig",
                               labels=[*labels, *CACHE_CONFIG_LABELS])
    for engine, (values, stats) in enumerate(rows):
        family.add_metric([*values, str(engine), str(block_size), str(stats.kv_blocks_total),
                           str(stats.host_blocks_total), "True"], 1.0)
    return family
