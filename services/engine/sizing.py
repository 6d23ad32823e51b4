"""Sizes and defaults an instance derives from its memory (docs/engine.md, "Capacity", "Admission", "Host tier").

    kv_capacity_blocks(hbm_bytes, utilisation, weight_bytes, kv_bytes_per_token, block_size, tp)
    default_max_running(kv_capacity_tokens, max_context)   SGLang's max_running_requests default
    host_cache_bytes(gpus, host_memory_bytes_per_node)      the DRAM a host-memory prefix tier may use
"""

from __future__ import annotations

import math

from services.engine.block_hashes import DEFAULT_BLOCK_SIZE

# SGLang model_runner: max_num_reqs = min(max(int(max_total_num_tokens / context_len * 512), 2048), 4096),
# and max_running_requests defaults to that pool size.
_SGLANG_REQS_PER_CONTEXT = 512
_SGLANG_MIN_REQS, _SGLANG_MAX_REQS = 2048, 4096
# Without a context limit, SGLang's formula has no denominator; 128K is the profiles' common max context.
_FALLBACK_CONTEXT = 131072
GPUS_PER_NODE = 8  # HGX/DGX H100 and H200 servers


def default_max_running(kv_capacity_tokens: int, max_context: int | None) -> int:
    """Running-sequence cap derived from the KV pool, as SGLang sizes its request pool."""
    context = max_context or _FALLBACK_CONTEXT
    return min(max(int(kv_capacity_tokens / context * _SGLANG_REQS_PER_CONTEXT), _SGLANG_MIN_REQS), _SGLANG_MAX_REQS)


def nodes_spanned(gpus: int, gpus_per_node: int = GPUS_PER_NODE) -> int:
    return math.ceil(gpus / gpus_per_node)


def host_cache_bytes(gpus: int, host_memory_bytes_per_node: float, fraction: float) -> int:
    """DRAM of the servers an instance spans that its prefix tier may fill."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError(f"host cache fraction must be in [0, 1], got {fraction}")
    return int(nodes_spanned(gpus) * host_memory_bytes_per_node * fraction)


def kv_capacity_blocks(
    hbm_bytes: float,
    utilisation: float,
    weight_bytes: float,
    kv_bytes_per_token: float,
    block_size: int = DEFAULT_BLOCK_SIZE,
    tp: int = 1,
) -> int:
    """KV blocks an instance of `tp` GPUs holds (docs/engine.md, "Capacity").

    blocks = floor((tp x HBM x utilisation - weights) / (KV bytes per token x block size))
    """
    if not 0.0 < utilisation <= 1.0:
        raise ValueError(f"memory utilisation must be in (0, 1], got {utilisation}")
    if kv_bytes_per_token <= 0 or block_size <= 0 or tp <= 0:
        raise ValueError("kv_bytes_per_token, block_size and tp must be positive")
    spare_bytes = tp * hbm_bytes * utilisation - weight_bytes
    blocks = math.floor(spare_bytes / (kv_bytes_per_token * block_size))
    if blocks <= 0:
        raise ValueError(
            f"no room for KV: {tp} GPU(s) x {hbm_bytes / 2**30:.1f} GiB x {utilisation} leaves "
            f"{spare_bytes / 2**30:.2f} GiB after {weight_bytes / 2**30:.1f} GiB of weights"
        )
    return blocks
