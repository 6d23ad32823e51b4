"""A role process: a pool of emulated instances, a gRPC server and the ops HTTP endpoints.

Every role (prefill, decode, relay decode, colocated) builds its instances the
same way: one Engine per instance, clocked by the roofline model of the pool's
GPU and TP degree, with KV capacity = (HBM x TP x utilisation - weights) / KV
bytes per block (docs/engine.md §Capacity).
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
from typing import Awaitable, Callable

import grpc
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from services.engine.pool import InstancePool
from services.engine.prefix_cache import block_hashes, kv_capacity_blocks
from services.engine.roofline import RooflineClock
from services.engine.scheduler import Engine, EngineConfig, SequenceHandle
from services.engine.sequence import FinishedEvent, TokenEvent
from services.launcher.plan import MeshPlan, ServicePlan
from services.http_limits import HttpLimits, start_http
from services.observability import add_ops_routes
from services.profiles import load_gpu, load_model
from services.rpc import server as grpc_server

log = logging.getLogger(__name__)


def kv_replication(model, tp: int) -> int:
    """How many TP ranks hold a copy of each KV entry (docs/engine.md §Capacity).

    GQA shards KV heads across ranks until there are more ranks than heads; MLA's
    latent cache is not split by head, so every rank keeps all of it.
    """
    if model.mla is not None:
        return tp
    return max(1, tp // model.num_kv_heads)


def build_engines(plan: MeshPlan, service: ServicePlan) -> list[Engine]:
    scenario, pool = plan.scenario, service.pool
    gpu, model = load_gpu(pool.gpu), load_model(scenario.model)
    clock = RooflineClock(gpu, model, tp=pool.tp)
    spec = scenario.engine
    capacity = kv_capacity_blocks(gpu.hbm_bytes, spec.gpu_memory_utilization, model.weight_bytes,
                                  model.kv_bytes_per_token * kv_replication(model, pool.tp), spec.block_size, tp=pool.tp)
    config = EngineConfig(kv_capacity_blocks=capacity, vocab_size=model.vocab_size, block_size=spec.block_size,
                          max_num_batched_tokens=spec.max_batched_tokens, chunk_size=spec.chunk_size,
                          max_running=spec.max_running, max_context=model.max_context)
    step_seconds = clock.step_seconds
    if scenario.time_dilation != 1.0:
        dilation = scenario.time_dilation
        step_seconds = lambda batch: dilation * clock.step_seconds(batch)  # noqa: E731 (the engine's hot path)
    return [Engine(config, step_seconds, name=f"{service.name}-{i}") for i in range(pool.count)]


class _EngineCollector:
    """Reads every engine's counters at scrape time (vLLM metric names, one label per instance)."""

    def __init__(self, engines: list[Engine]) -> None:
        self.engines = engines

    def collect(self):
        gauges = {
            "vllm:num_requests_running": ("running", "Sequences in the running batch"),
            "vllm:num_requests_waiting": ("waiting", "Sequences waiting for admission"),
            "vllm:kv_cache_usage_perc": ("kv_usage", "Fraction of KV blocks in use"),
        }
        counters = {
            "vllm:prefix_cache_queries": ("prefix_cache_query_tokens", "Prompt tokens looked up in the prefix cache"),
            "vllm:prefix_cache_hits": ("prefix_cache_hit_tokens", "Prompt tokens found in the prefix cache"),
            "vllm:generation_tokens": ("tokens_generated", "Tokens generated"),
            "pdd_engine_busy_seconds": ("busy_seconds", "Emulated GPU-busy time"),
            "pdd_engine_steps": ("steps", "Engine steps run"),
        }
        stats = [(e.name, e.stats()) for e in self.engines]
        for name, (attr, doc) in gauges.items():
            family = GaugeMetricFamily(name, doc, labels=["instance"])
            for instance, s in stats:
                family.add_metric([instance], float(getattr(s, attr)))
            yield family
        for name, (attr, doc) in counters.items():
            family = CounterMetricFamily(name, doc, labels=["instance"])
            for instance, s in stats:
                family.add_metric([instance], float(getattr(s, attr)))
            yield family


class RoleProcess:
    def __init__(self, plan: MeshPlan, service: ServicePlan) -> None:
        self.plan, self.service = plan, service
        self.engines = build_engines(plan, service)
        self.pool = InstancePool(self.engines)
        self.registry = CollectorRegistry()
        self.registry.register(_EngineCollector(self.engines))
        self.draining = False

    def load(self) -> float:
        """Sequences admitted or waiting, as a fraction of what the pool can run at once."""
        capacity = sum(e.config.max_running for e in self.engines)
        return sum(e.load for e in self.engines) / capacity

    def instance_name(self, engine: Engine) -> str:
        return engine.name

    def best_prefix(self, prompt: list[int]) -> tuple[Engine, int]:
        hashes = block_hashes(prompt, self.engines[0].block_size)
        hits = [(e.cached_prefix_tokens(hashes), -e.load, i) for i, e in enumerate(self.engines)]
        hit, _, index = max(hits)
        return self.engines[index], min(hit, len(prompt))

    async def first_token(self, handle: SequenceHandle) -> int:
        """Run a prefill-only sequence to its end and return the token it produced."""
        token = None
        try:
            async for event in handle.events():
                if isinstance(event, TokenEvent):
                    token = event.token_id
                elif isinstance(event, FinishedEvent):
                    break
        finally:
            handle.cancel()
        if token is None:
            raise RuntimeError(f"{handle.request_id}: prefill ended without a token")
        return token

    def stats(self) -> dict:
        return {"role": self.service.role.value, "name": self.service.name, "draining": self.draining,
                "instances": {e.name: {k: v for k, v in vars_of(e.stats()).items()} for e in self.engines}}

    def stats_json(self, extra: dict) -> str:
        return json.dumps({**self.stats(), **extra})

    async def run(self, add_servicer: Callable[[grpc.aio.Server], None], extra_stats: Callable[[], dict],
                  on_close: Callable[[], Awaitable[None]]) -> None:
        for engine in self.engines:
            await engine.start()
        server = grpc_server()
        add_servicer(server)
        server.add_insecure_port(f"{self.service.listen_host}:{self.service.grpc_port}")
        await server.start()
        app = web.Application()
        add_ops_routes(app, self.registry, lambda: {**self.stats(), **extra_stats()})
        runner, _ = await start_http(app, self.service.listen_host, self.service.http_port,
                                     HttpLimits(max_connections=64))  # /health, /metrics, /stats only
        log.info("%s (%s) serving gRPC on %s, %d instance(s)", self.service.name, self.service.role.value,
                 self.service.grpc_address, len(self.engines))
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        # Drain: refuse new work, give in-flight RPCs a grace period, then fail what is left explicitly.
        self.draining = True
        await server.stop(grace=10.0)
        await on_close()
        for engine in self.engines:
            await engine.stop()
        await runner.cleanup()


def vars_of(stats) -> dict:
    return {name: getattr(stats, name) for name in stats.__dataclass_fields__}
