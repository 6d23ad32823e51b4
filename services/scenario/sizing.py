"""What one instance of a pool holds: KV blocks in device and host memory, its running cap.

Every role process sizes its engines here, and the router and chaos stages read the same
numbers, so nobody recomputes a capacity differently (docs/engine.md, "Capacity").
"""

from __future__ import annotations

from dataclasses import dataclass

from services.engine.parallelism import Parallelism
from services.engine.sizing import default_max_running, host_cache_bytes, kv_capacity_blocks
from services.profiles import load_gpu, load_model
from services.scenario.model import PoolSpec, Scenario


@dataclass(frozen=True, slots=True)
class InstanceSizing:
    parallel: Parallelism
    kv_capacity_blocks: int
    host_cache_blocks: int
    max_running: int


def instance_sizing(scenario: Scenario, pool: PoolSpec) -> InstanceSizing:
    gpu, model, spec = load_gpu(pool.gpu), load_model(scenario.model), scenario.engine
    parallel = Parallelism(pool.tp, pool.dp_attention, pool.ep, **pool.layout)
    parallel.check(model)
    replicas = parallel.kv_replicas(model)
    blocks = kv_capacity_blocks(gpu.hbm_bytes, spec.gpu_memory_utilization, parallel.weight_bytes(model),
                                model.kv_bytes_per_token * replicas, spec.block_size, tp=pool.tp)
    host_bytes = spec.host_cache_bytes
    if host_bytes is None:
        host_bytes = host_cache_bytes(pool.tp, gpu.host_memory_bytes, spec.host_cache_fraction)
    # the host tier holds one copy of each block, whatever the replication on the GPUs
    host_blocks = int(host_bytes // (model.kv_bytes_per_token * spec.block_size))
    max_running = spec.max_running or default_max_running(blocks * spec.block_size, model.max_context)
    return InstanceSizing(parallel, blocks, host_blocks, max_running)
