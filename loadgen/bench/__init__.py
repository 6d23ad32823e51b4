"""The open-loop benchmark client: `await run_bench(BenchConfig(...))`."""

from loadgen.bench.config import BenchConfig
from loadgen.bench.runner import BenchError, run_bench

__all__ = ["BenchConfig", "BenchError", "run_bench"]
