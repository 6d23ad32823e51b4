"""What a GPU is to the step clock: datasheet peaks, price, and the constants fitted on it.

Efficiencies are fractions of the datasheet peaks, so the same fractions carry
over to a GPU that was never measured (docs/roofline.md §Profiles). Fixed
costs belong to the launch style, because eager launches pay the CPU per
kernel and CUDA graphs do not (docs/roofline.md §Fixed costs).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from services.types import LaunchStyle
from services.units import parse_size

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Constant(BaseModel):
    """One calibrated number and where it came from."""

    model_config = _FROZEN
    value: float = Field(ge=0, description="the constant itself, in the unit its name says")
    source: str = Field(description="what it was fitted on, or how it was derived")


class Efficiency(BaseModel):
    """Achieved fractions of peak per kind of operation (docs/roofline.md §GEMM, §Attention, §Elementwise)."""

    model_config = _FROZEN
    gemm_compute_fraction: Constant = Field(description="large-GEMM throughput / dense peak")
    gemm_bandwidth_fraction: Constant = Field(description="skinny-GEMM weight streaming rate / HBM peak")
    gemm_blend_exponent: Constant = Field(description="p of the smooth max between GEMM compute and memory time")
    attention_compute_fraction: Constant = Field(description="flash-attention throughput on long sequences / peak")
    attention_half_tokens: Constant = Field(description="sequence length at which flash attention reaches half of it")
    attention_decode_bandwidth_fraction: Constant = Field(description="decode attention KV read rate / HBM peak")
    elementwise_bandwidth_fraction: Constant = Field(description="copy rate (read + write) / HBM peak")
    fp8_gemm_compute_fraction: Constant | None = Field(None, description=(
        "fp8 GEMMs with fine-grained scales (DeepGEMM): throughput / fp8 peak; None: the bf16 fractions"))
    fp8_gemm_bandwidth_fraction: Constant | None = Field(None, description="fp8 GEMMs: weight streaming rate / HBM peak")
    fp8_gemm_blend_exponent: Constant | None = Field(None, description="fp8 GEMMs: p of the smooth max")


class LaunchCosts(BaseModel):
    """Fixed costs of one launch style (docs/roofline.md §Fixed costs)."""

    model_config = _FROZEN
    kernel_s: Constant = Field(description="seconds of launch cost per kernel")
    step_s: Constant = Field(description="seconds added once per step")
    overlap_exponent: Constant = Field(
        description="q of the smooth max (gpu^q + launch^q)^(1/q): 1 adds launch to GPU time, a large q overlaps them"
    )


class GpuProfile(BaseModel):
    model_config = _FROZEN

    name: str = Field(description="profile name, e.g. 'h200-sxm'")
    description: str = Field(description="what the card is")
    dense_bf16_flops: float = Field(gt=0, description="datasheet dense bf16 tensor FLOP/s")
    dense_fp8_flops: float | None = Field(None, gt=0, description="datasheet dense fp8 FLOP/s; None without fp8")
    hbm_bytes: int = Field(gt=0, description="device memory in bytes, as the driver reports it")
    hbm_bandwidth_Bps: float = Field(gt=0, description="datasheet memory bandwidth, bytes per second")
    interconnect: str = Field(description="what joins the GPUs of one node")
    interconnect_bandwidth_Bps: float = Field(gt=0, description="intra-node bandwidth per GPU and direction, bytes/s")
    nic_bandwidth_bps: float = Field(gt=0, description="scale-out NIC bandwidth per GPU, bits per second")
    nic_latency_s: Constant = Field(description="fixed latency of a collective that crosses nodes over the NICs")
    gpus_per_node: int = Field(8, ge=1, description="GPUs one server's interconnect joins")
    sm_count: int | None = Field(None, ge=1, description=(
        "streaming multiprocessors (datasheet); the share DeepEP's normal kernels take from compute under "
        "two-batch overlap (docs/roofline.md §Two-batch overlap); None: not modelled"))
    pcie_bandwidth_Bps: float = Field(gt=0, description="host link per GPU and direction, bytes/s")
    host_memory_bytes: int = Field(gt=0, description="DRAM of one server of these GPUs, e.g. '2TiB'")
    host_memory_source: str = Field(description="where the server's memory size comes from")
    price_per_hour: float = Field(ge=0, description="price of one GPU-hour; overrides: docs/roofline.md §Profiles")
    price_source: str = Field(description="where the default price comes from")
    allreduce_latency_s: Constant = Field(description="fixed latency of one tensor-parallel all-reduce")
    calibration: str = Field(description="what this GPU's constants were fitted on or derived from")
    efficiency: Efficiency
    launch: dict[LaunchStyle, LaunchCosts] = Field(description="fixed costs per launch style")

    @field_validator("hbm_bytes", "host_memory_bytes", mode="before")
    @classmethod
    def _parse_size(cls, value: object) -> object:
        return parse_size(value) if isinstance(value, str) else value

    @field_validator("launch")
    @classmethod
    def _every_style(cls, value: dict[LaunchStyle, LaunchCosts]) -> dict[LaunchStyle, LaunchCosts]:
        missing = [style.value for style in LaunchStyle if style not in value]
        if missing:
            raise ValueError(f"launch costs missing for {', '.join(missing)}")
        return value

    def peak_flops(self, weight_dtype: str) -> float:
        """The tensor rate a model of this weight dtype runs at; fp8 falls back to bf16 on cards without it."""
        if weight_dtype == "fp8" and self.dense_fp8_flops is not None:
            return self.dense_fp8_flops
        return self.dense_bf16_flops
