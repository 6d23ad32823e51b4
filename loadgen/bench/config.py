"""What a benchmark run is asked to do: one frozen, validated config."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from loadgen.lengths import Duration
from loadgen.spec import parse_spec, spec_string
from loadgen.summary import SlaConfig
from loadgen.workloads import WorkloadConfig


class BenchConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(description="router base URL, e.g. http://127.0.0.1:8000")
    workload: str | WorkloadConfig = Field(description="workload SPEC, e.g. agentic:context=64K, or its config")
    out_dir: Path
    rate: float | None = Field(None, gt=0, description="open loop: requests per second")
    concurrency: int | None = Field(None, ge=1, description="closed loop: requests in flight")
    duration_s: Duration = Field(60.0, description="stop sending after this long")
    max_requests: int | None = Field(None, ge=1, description="stop sending after this many")
    model: str | None = Field(None, description="model name; default: the first of GET /v1/models")
    seed: int = 0
    sla: SlaConfig = SlaConfig()
    request_timeout_s: Duration = Field(300.0, description="deadline of each request, send to last byte")
    label: str | None = Field(None, description="name of the run in reports; default: the mode the router reports")
    cost_per_hour: float | None = Field(None, ge=0, description="hardware cost of the deployment, for BCR")
    progress: bool = True

    @model_validator(mode="after")
    def _one_pacing(self) -> BenchConfig:
        if self.rate is not None and self.concurrency is not None:
            raise ValueError("give either rate (open loop) or concurrency (closed loop), not both")
        if self.duration_s <= 0:
            raise ValueError("duration must be positive")
        return self

    @property
    def workload_config(self) -> WorkloadConfig:
        return parse_spec(self.workload) if isinstance(self.workload, str) else self.workload

    @property
    def workload_spec(self) -> str:
        return self.workload if isinstance(self.workload, str) else spec_string(self.workload)

    @property
    def endpoint(self) -> str:
        return self.url.rstrip("/") + "/v1/completions"
