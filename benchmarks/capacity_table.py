"""The capacity table of docs/engine.md: what one pdd-paper instance holds and decodes per dollar.

    python -m benchmarks.capacity_table            # prints the markdown table

Per row: an instance of the paper-pd-intra decode pool with the row's GPU, TP degree, DP
attention (dp_attention = tp, or off) and host tier (the default size, or none), sized by
services/scenario/sizing.py. "64K sequences" is KV tokens / 65536. The KV-bound batch is
every 64K sequence the device holds (within the running cap); its decode step comes from the
roofline clock, and tokens/s per $/h divides by tp x the GPU's price per hour.
"""

from __future__ import annotations

from services.engine.batch import StepBatch
from services.engine.roofline import RooflineClock
from services.profiles import load_gpu, load_model
from services.scenario import load_scenario
from services.scenario.sizing import instance_sizing

CONTEXT = 65536
ROWS = [("h100-sxm", 16), ("h200-sxm", 8), ("h200-sxm", 16)]


def row(gpu_name: str, tp: int, dp_attention: bool, host_tier: bool) -> str:
    dp = tp if dp_attention else 1
    overrides = [f"pools.decode.gpu={gpu_name}", f"pools.decode.tp={tp}", f"pools.decode.dp_attention={dp}",
                 "engine.max_running=null"]
    if not host_tier:
        overrides.append("engine.host_cache_bytes=0")
    scenario = load_scenario("paper-pd-intra", overrides)
    pool = next(p for p in scenario.pools if p.name == "decode")
    sizing = instance_sizing(scenario, pool)
    device_seqs = sizing.kv_capacity_blocks * scenario.engine.block_size // CONTEXT
    host_seqs = sizing.host_cache_blocks * scenario.engine.block_size // CONTEXT
    batch = min(device_seqs, sizing.max_running)
    gpu = load_gpu(gpu_name)
    clock = RooflineClock(gpu, load_model(scenario.model), tp=tp, dp_attention=dp)
    step_s = clock.step_seconds(StepBatch(decode_contexts=(CONTEXT,) * batch))
    tokens_per_s = batch / step_s
    dollars = tp * gpu.price_per_hour
    return (f"| {gpu_name} TP{tp} | {'yes' if dp_attention else 'no'} | {'yes' if host_tier else 'no'} "
            f"| {device_seqs:,} | {device_seqs + host_seqs:,} | {batch:,} | {step_s * 1e3:.1f} "
            f"| {tokens_per_s:,.0f} | {dollars:.2f} | {tokens_per_s / dollars:,.0f} |")


def main() -> None:
    print("| instance | DP attention | host tier | 64K seqs in HBM | 64K seqs cached (HBM + host) "
          "| KV-bound batch | decode step ms | tokens/s | $/h | tokens/s per $/h |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for gpu_name, tp in ROWS:
        for dp_attention in (False, True):
            for host_tier in (False, True):
                print(row(gpu_name, tp, dp_attention, host_tier))


if __name__ == "__main__":
    main()
