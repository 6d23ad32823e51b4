"""A plan's question, as a frozen schema: the model, the GPUs and line on offer, the traffic, the SLO, the objective.

A spec is a YAML file with `key=value` overrides on top (the scenario loader's
syntax: `budget_per_hour=200`, `wan=[...]`, `slo.ttft_s=3s`), validated here
into one line a person can act on (docs/plan.md, "The spec").
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from loadgen.spec import parse_spec
from loadgen.workloads import MooncakeConfig
from services.profiles import gpu_names, model_names
from services.scenario import SlaSpec
from services.scenario.loader import apply_override
from services.units import parse_duration, parse_rate

_FROZEN = ConfigDict(frozen=True, extra="forbid")
Architecture = Literal["colocated", "pd-intra", "pd-cross", "pdd"]
ARCHITECTURES: tuple[Architecture, ...] = ("colocated", "pd-intra", "pd-cross", "pdd")
SPECS = Path(__file__).parent / "specs"  # the shipped specs: mini.yaml (Llama-3-8B class), report.yaml


class PlanError(ValueError):
    """A spec a person must fix; the message says which field and why."""


class GpuOffer(BaseModel):
    model_config = _FROZEN
    gpu: str = Field(description="GPU profile name (services/profiles/gpus.yaml), e.g. 'h100-sxm'")
    price_per_hour: float = Field(gt=0, description="price of one GPU-hour in this datacenter")

    @field_validator("gpu")
    @classmethod
    def _known(cls, v: str) -> str:
        if v not in gpu_names():
            raise ValueError(f"unknown GPU {v!r}; choose one of {', '.join(gpu_names())}")
        return v


class LineOffer(BaseModel):
    model_config = _FROZEN
    rate_bps: float = Field(alias="rate", description="the line's rate, e.g. '20gbit'")
    price_per_hour: float = Field(ge=0, description="what the line costs an hour")
    delay_s: float = Field(0.01, alias="delay", description="one-way propagation delay, e.g. '10ms'")

    @field_validator("rate_bps", mode="before")
    @classmethod
    def _rate(cls, v):
        rate = parse_rate(v)
        if not rate > 0:
            raise ValueError(f"a line's rate must be positive, got {v!r}")
        return rate

    @field_validator("delay_s", mode="before")
    @classmethod
    def _delay(cls, v):
        return parse_duration(v)


class Slo(SlaSpec):
    """The scenario's SLA (TTFT and TPOT limits, unit strings) and the share of requests that must meet it."""

    # the knee search (services/experiments/goodput.py) reads max goodput at the 90% crossing
    attainment: Literal[0.9] = Field(0.9, description="share of requests within both limits at the knee (0.9)")


class Search(BaseModel):
    """How wide the search runs and how long its simulated points are (emulated seconds)."""

    model_config = _FROZEN
    max_instances: int = Field(8, ge=1, le=64, description="most instances of one pool")
    step_budgets: tuple[int, ...] = Field((8192,), min_length=1, description="engine step token budgets to try")
    transfer_thresholds_s: tuple[float, ...] = Field((0.5,), min_length=1, description="PDD relay thresholds to try")
    relay_caps: tuple[int, ...] = Field((512,), min_length=1, description="PDD relay caps (tokens) to try")
    catch_up_thresholds: tuple[int, ...] = Field((64,), min_length=1, description="PDD handoff mode thresholds")
    finalists: int = Field(3, ge=1, le=10, description="candidates per architecture whose knee is simulated")
    warmup_s: float = Field(30.0, gt=0, description="a simulated point's warm-up")
    measure_s: float = Field(60.0, gt=0, description="a simulated point's measured window at most")
    window_requests: int | None = Field(None, ge=100, description="a window ends with this request if sooner")
    byte_scale: float = Field(1000.0, ge=1, description="the emitted scenarios' byte scale (real = emulated / this)")


class PlanSpec(BaseModel):
    model_config = _FROZEN
    model: str = Field(description="model profile name, e.g. 'llama3-70b'")
    gpus: dict[str, GpuOffer] = Field(description="datacenter name -> the GPU it offers and its price; the first "
                                                  "is datacenter A (prefill, relay), the second B (decode)")
    wan: tuple[LineOffer, ...] = Field((), description="the line options between the datacenters")
    workload: str = Field(description="a --workload spec, e.g. 'agentic:context=32K'")
    slo: Slo = Slo()
    budget_per_hour: float | None = Field(None, gt=0, description="objective: the most SLA goodput for this budget")
    target_rps: float | None = Field(None, gt=0, description="objective: the least cost for this SLA goodput")
    architectures: tuple[Architecture, ...] = Field(ARCHITECTURES, min_length=1)
    seeds: int = Field(3, ge=1, le=20, description="seeds the finalists' knees are confirmed over")
    search: Search = Search()

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if v not in model_names():
            raise ValueError(f"unknown model {v!r}; choose one of {', '.join(model_names())}")
        return v

    @field_validator("workload")
    @classmethod
    def _workload(cls, v: str) -> str:
        if isinstance(parse_spec(v), MooncakeConfig):  # parse_spec raises a ValueError naming what is wrong
            # a trace's load is its replay speed, not the request rate the screen and the knees speak in
            raise ValueError("plan runs generated workloads (agentic, poisson, gamma); a trace is not planned yet")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> PlanSpec:
        if (self.budget_per_hour is None) == (self.target_rps is None):
            raise ValueError("give exactly one objective: budget_per_hour (most goodput) or target_rps (least cost)")
        if not 1 <= len(self.gpus) <= 2:
            raise ValueError(f"gpus names one or two datacenters, got {len(self.gpus)}")
        cross = {"pd-cross", "pdd"} & set(self.architectures)
        if cross and len(self.gpus) < 2:
            raise ValueError(f"{', '.join(sorted(cross))} need two datacenters in gpus")
        if cross and not self.wan:
            raise ValueError(f"{', '.join(sorted(cross))} need at least one line option in wan")
        if len(set(self.architectures)) != len(self.architectures):
            raise ValueError("architectures lists one architecture twice")
        return self

    @property
    def objective(self) -> str:
        return "max-goodput" if self.budget_per_hour is not None else "min-cost"

    @property
    def dc_a(self) -> str:
        return next(iter(self.gpus))

    @property
    def dc_b(self) -> str:
        return list(self.gpus)[-1]

    def scaled_prices(self, factor: float) -> PlanSpec:
        """Every price and the budget times `factor` (the planner's choices must not move)."""
        gpus = {dc: o.model_copy(update={"price_per_hour": o.price_per_hour * factor}) for dc, o in self.gpus.items()}
        wan = tuple(line.model_copy(update={"price_per_hour": line.price_per_hour * factor}) for line in self.wan)
        budget = None if self.budget_per_hour is None else self.budget_per_hour * factor
        return self.model_copy(update={"gpus": gpus, "wan": wan, "budget_per_hour": budget})


def load_spec(path: str | Path | None, overrides: Iterable[str] = ()) -> PlanSpec:
    """The spec in `path` (or none: the overrides alone) with `overrides` on top; PlanError names any problem."""
    data: dict = {}
    if path is not None:
        file = Path(path)
        if not file.is_file():
            raise PlanError(f"spec file {str(file)!r} does not exist")
        try:
            data = yaml.safe_load(file.read_text()) or {}
        except yaml.YAMLError as exc:
            raise PlanError(f"spec {str(file)!r} is not valid YAML: {str(exc).splitlines()[0]}") from None
        if not isinstance(data, dict):
            raise PlanError(f"spec {str(file)!r} must be a YAML mapping, got {type(data).__name__}")
    for override in overrides:
        try:
            apply_override(data, override)
        except ValueError as exc:
            raise PlanError(str(exc)) from None
    try:
        return PlanSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "spec"
        more = f" (and {len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise PlanError(f"plan spec: {where}: {first['msg'].removeprefix('Value error, ')}{more}") from None
