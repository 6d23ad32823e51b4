"""Load generation for pdd-emu: workloads, the open-loop benchmark client, Locust users and reports.

    from loadgen import BenchConfig, run_bench, build_report
    summary = await run_bench(BenchConfig(url=..., workload="agentic:context=64K", rate=2, out_dir=...))

Folder map: workloads/ (agentic sessions, Mooncake replay, synthetic), bench/
(asyncio client), report/ (table, plots, HTML), locustfile.py, samples/.
Names are imported on first use, so the gevent Locust process never loads
aiohttp or matplotlib.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "BenchConfig": "loadgen.bench", "BenchError": "loadgen.bench", "run_bench": "loadgen.bench",
    "HIT_BIN_LABELS": "loadgen.hitbins", "HitDistribution": "loadgen.hitbins",
    "RequestPlan": "loadgen.plan", "plan_offline": "loadgen.plan",
    "Report": "loadgen.report", "build_report": "loadgen.report",
    "SpecError": "loadgen.spec", "parse_spec": "loadgen.spec",
    "SlaConfig": "loadgen.summary", "Summary": "loadgen.summary",
    "SweepConfig": "loadgen.sweep", "SweepResult": "loadgen.sweep", "run_sweep": "loadgen.sweep",
    "TraceStats": "loadgen.trace_stats", "trace_stats": "loadgen.trace_stats",
    "AgenticConfig": "loadgen.workloads", "AgenticWorkload": "loadgen.workloads",
    "MooncakeConfig": "loadgen.workloads", "MooncakeWorkload": "loadgen.workloads",
    "SyntheticConfig": "loadgen.workloads", "SyntheticWorkload": "loadgen.workloads",
    "build_workload": "loadgen.workloads",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'loadgen' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
