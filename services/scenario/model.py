"""The scenario schema: frozen pydantic models with help text and unit-string fields.

A scenario is a preset or file with `--set key=value` overrides on top
(services/scenario/loader.py); a pool without its own price takes its GPU's
(services/profiles: PDD_EMU_GPU_PRICE_* first, then the profile). Emulated units
throughout: link rates and KV bytes are what the modelled hardware would see;
`byte_scale` divides both when real bytes are sent.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from services.types import Mode, Role
from services.units import parse_duration, parse_fraction, parse_rate, parse_size

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class LinkSpec(BaseModel):
    model_config = _FROZEN
    rate_bps: float = Field(description="emulated line rate, e.g. '10gbit'")
    delay_s: float = Field(0.0, description="one-way propagation delay, e.g. '5ms'")
    jitter_s: float = Field(0.0, description="jitter amplitude, e.g. '1ms'")
    jitter_dist: Literal["uniform", "normal", "pareto", "paretonormal"] = "normal"
    loss: float = Field(0.0, description="loss probability, e.g. '0.1%'")
    queue_bytes: int = Field(64 * 2**20, description="emulated queue bound, e.g. '64MiB'")
    window_bytes: int | None = Field(None, description=(
        "emulated bytes one connection may have in flight per round trip (a TCP window, docs/netem.md "
        "§TCP-like window), e.g. '3MiB'; None: one connection can fill the line"))
    schedule: str | None = Field(None, description="netem schedule file (YAML or CSV) applied at start")

    @field_validator("rate_bps", mode="before")
    @classmethod
    def _rate(cls, v):
        return parse_rate(v)

    @field_validator("delay_s", "jitter_s", mode="before")
    @classmethod
    def _duration(cls, v):
        return parse_duration(v)

    @field_validator("loss", mode="before")
    @classmethod
    def _loss(cls, v):
        return parse_fraction(v)

    @field_validator("queue_bytes", mode="before")
    @classmethod
    def _queue(cls, v):
        return parse_size(v)

    @field_validator("window_bytes", mode="before")
    @classmethod
    def _window(cls, v):
        return None if v in (None, "", "none") else parse_size(v)


MAX_INSTANCE_GPUS = 320  # DeepSeek-V3's report decodes over EP320; its online system over EP144


class PoolSpec(BaseModel):
    model_config = _FROZEN
    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$", description="service name, unique in the scenario")
    role: Role
    dc: str = Field(description="datacenter the pool sits in")
    gpu: str = Field(description="GPU profile name, e.g. 'h200-sxm'")
    tp: int = Field(1, ge=1, le=MAX_INSTANCE_GPUS, description=(
        "GPUs of one instance (tensor-parallel degree of its MLPs)"))
    dp_attention: int = Field(1, ge=1, le=MAX_INSTANCE_GPUS, description=(
        "data-parallel attention groups per instance (SGLang --enable-dp-attention --dp-size); attention is "
        "tensor-parallel over tp / dp_attention GPUs and an MLA latent is held once per group; 1: off"))
    ep: int = Field(1, ge=1, le=MAX_INSTANCE_GPUS, description=(
        "expert-parallel degree: 1 splits every expert over the tp GPUs, tp puts whole experts on each GPU "
        "with a dispatch/combine all-to-all per MoE layer (DeepEP)"))
    redundant_experts: int | None = Field(None, ge=0, description=(
        "EPLB's replicated experts with ep > 1; None: the fewest that fill the ep GPUs evenly"))
    expert_imbalance: float = Field(1.0, ge=1.0, description=(
        "routed tokens of the busiest GPU over the mean with ep > 1 (1.0: balanced; docs/roofline.md)"))
    tbo: bool | None = Field(None, description="two-batch overlap of the MoE layers; None: on with ep > 1")
    dense_dp: bool = Field(False, description=(
        "dense layers and LM head data-parallel on every GPU (SGLang --moe-dense-tp-size 1); more weights per GPU"))
    count: int = Field(1, ge=1, le=64, description="instances hosted by this pool's process")
    price_per_hour: float | None = Field(None, ge=0, description="per GPU; defaults to the GPU profile's")

    @property
    def layout(self) -> dict:
        """The step clock's layout options beyond tp, dp_attention and ep (RooflineClock's `layout`)."""
        return {"redundant_experts": self.redundant_experts, "expert_imbalance": self.expert_imbalance,
                "tbo": self.tbo, "dense_dp": self.dense_dp}

    @model_validator(mode="after")
    def _layout(self) -> "PoolSpec":
        if self.tp % self.dp_attention:
            raise ValueError(f"pool {self.name}: dp_attention={self.dp_attention} must divide tp={self.tp}")
        if self.ep not in (1, self.tp):
            raise ValueError(f"pool {self.name}: ep={self.ep} must be 1 or equal to tp={self.tp}")
        return self


class EngineSpec(BaseModel):
    model_config = _FROZEN
    block_size: int = Field(16, ge=1, le=4096, description="prefix-cache block size in tokens")
    max_batched_tokens: int = Field(8192, ge=64, description="token budget of one engine step (decodes + chunks)")
    long_prefill_token_threshold: int | None = Field(None, ge=16, description=(
        "most prefill tokens one sequence computes in a step (vLLM's name); None: the whole step budget"))
    max_running: int | None = Field(None, ge=1, description=(
        "cap on sequences running at once per instance (vLLM's max_num_seqs); None: derived from the "
        "instance's KV capacity as SGLang does (docs/engine.md, Admission)"))
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    host_cache_bytes: int | None = Field(None, ge=0, description=(
        "host-memory prefix tier per instance, e.g. '1TiB'; None: host_cache_fraction of the DRAM of the "
        "servers the instance spans (GPU profile); 0: no host tier"))
    host_cache_fraction: float = Field(0.5, ge=0, le=1, description=(
        "share of the servers' DRAM the default host tier takes; the rest is left to the OS and staging"))

    @field_validator("host_cache_bytes", mode="before")
    @classmethod
    def _host_size(cls, v):
        return parse_size(v) if isinstance(v, str) else v


class SlaSpec(BaseModel):
    model_config = _FROZEN
    ttft_s: float = Field(5.0, gt=0)
    tpot_s: float = Field(0.1, gt=0)

    @field_validator("ttft_s", "tpot_s", mode="before")
    @classmethod
    def _duration(cls, v):
        return parse_duration(v)


class PddSpec(BaseModel):
    """PDD's policy knobs (docs/pdd.md); the defaults follow the PDD report where it gives one."""

    model_config = _FROZEN
    transfer_threshold_s: float = Field(0.5, gt=0, description="estimated WAN transfer above this goes P-RLD-MD")
    relay_max_load: float = Field(0.9, gt=0, le=1, description="relay load above which requests go P-MD instead")
    relay_cap: int = Field(512, ge=1, description="most output positions the relay produces before pausing")
    catch_up_threshold: int = Field(64, ge=1, description="backlog (tokens) above which a handoff may catch up")
    busy_relay_load: float = Field(0.5, gt=0, le=1, description="relay load at or above which handoffs are one-shot")

    @field_validator("transfer_threshold_s", mode="before")
    @classmethod
    def _duration(cls, v):
        return parse_duration(v)


class Scenario(BaseModel):
    model_config = _FROZEN
    name: str
    description: str = ""
    mode: Mode
    model: str = Field(description="model profile name, e.g. 'llama3-8b'")
    seed: int = Field(0, ge=0, lt=2**32)
    byte_scale: float = Field(1000.0, ge=1, description="real bytes sent = emulated bytes / byte_scale")
    time_dilation: float = Field(1.0, ge=1, le=100, description=(
        "emulated GPU steps last this many times their roofline time, so a deployment too busy for the "
        "machine's CPUs runs slower than real time; links, SLA and timeouts must be dilated alike "
        "(services/experiments/dilation.py, docs/results.md)"))
    pools: tuple[PoolSpec, ...]
    rdma: LinkSpec = LinkSpec(rate_bps=400e9, delay_s=10e-6)
    wan: LinkSpec = LinkSpec(rate_bps=10e9, delay_s=5e-3)
    wan_price_per_hour: float = Field(0.0, ge=0, description="price of the WAN line")
    engine: EngineSpec = EngineSpec()
    sla: SlaSpec = SlaSpec()
    pdd: PddSpec = PddSpec()
    max_inflight: int = Field(512, ge=1, description="jobs (a request's prompts x n) the router runs at once; more get 429")
    request_timeout_s: float = Field(300.0, gt=0, description="deadline of one request end to end")
    transfer_timeout_s: float = Field(120.0, gt=0, description="deadline for a KV transfer to land")
    kv_streaming: bool = Field(True, description=(
        "prefill sends each chunk's KV as soon as the engine step that computed it ends, on RDMA and WAN "
        "alike, as Mooncake and DistServe do (docs/engine.md, Streamed KV); off: the whole KV after prefill"))
    control_over_wan: bool = Field(False, description=(
        "gRPC between datacenters crosses a shaped WAN control link, as in compose (docs/mesh.md, Topology); "
        "off by default: the chaos and experiment figures were measured with gRPC sent directly"))

    @field_validator("request_timeout_s", "transfer_timeout_s", mode="before")
    @classmethod
    def _duration(cls, v):
        return parse_duration(v)

    @model_validator(mode="after")
    def _pools_fit_mode(self) -> "Scenario":
        names = [p.name for p in self.pools]
        if len(set(names)) != len(names):
            raise ValueError(f"pool names must be unique, got {names}")
        roles = {p.role for p in self.pools}
        need = {
            Mode.COLOCATED: {Role.COLOCATED},
            Mode.PD_INTRA: {Role.PREFILL, Role.DECODE},
            Mode.PD_CROSS: {Role.PREFILL, Role.DECODE},
            Mode.PDD: {Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE},
            Mode.PDD_KVSHIP: {Role.PREFILL, Role.RELAY_DECODE, Role.MAIN_DECODE},
        }[self.mode]
        if not need <= roles:
            raise ValueError(f"mode {self.mode.value} needs pools with roles {sorted(r.value for r in need)}")
        dcs = {p.role: p.dc for p in self.pools}
        if self.mode is Mode.PD_INTRA and dcs[Role.PREFILL] != dcs[Role.DECODE]:
            raise ValueError("pd-intra puts prefill and decode in the same datacenter")
        if self.mode is Mode.PD_CROSS and dcs[Role.PREFILL] == dcs[Role.DECODE]:
            raise ValueError("pd-cross puts prefill and decode in different datacenters")
        if self.mode in (Mode.PDD, Mode.PDD_KVSHIP) and (
            dcs[Role.PREFILL] != dcs[Role.RELAY_DECODE] or dcs[Role.PREFILL] == dcs[Role.MAIN_DECODE]
        ):
            raise ValueError("pdd puts prefill and relay decode in one datacenter and main decode in another")
        return self

    def pools_with(self, *roles: Role) -> list[PoolSpec]:
        return [p for p in self.pools if p.role in roles]

    def link_between(self, a: PoolSpec, b: PoolSpec) -> LinkSpec:
        return self.rdma if a.dc == b.dc else self.wan
