"""Fit a GPU's clock constants from a measurement file (docs/roofline.md §Calibration).

Two stages, so that the layer rows stay an honest check: the op fractions are
fitted on the microbenchmarks alone, through the same op formulas the clock
uses; only the launch costs are then fitted on the layer rows, through the
clock itself. Both stages minimise log(predicted / measured).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from services.engine.batch import Chunk, StepBatch
from services.engine.roofline import RooflineClock
from services.engine.roofline_ops import (
    OpRates, decode_attention_cost, gemm_cost, gemm_seconds, prefill_attention_cost,
)
from services.profiles.gpu import Constant, Efficiency, GpuProfile, LaunchCosts
from services.profiles.measurement import GRAPH_LAYERS, Measurements
from services.profiles.model import ModelProfile
from services.types import LaunchStyle

BF16_BYTES = 2
SIGNIFICANT_DIGITS = 4  # of the constants written to the profile


@dataclass(frozen=True)
class Row:
    group: str
    label: str
    measured_s: float
    predicted_s: float

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.predicted_s / self.measured_s - 1.0)


@dataclass(frozen=True)
class Calibration:
    gpu: GpuProfile  # the input GPU with the fitted constants
    micro_rows: list[Row]
    layer_rows: list[Row]
    microbenchmark_offsets_s: dict[str, float]  # per-launch timing offsets of the single-op benchmarks; not kept

    def mape_pct(self, group: str) -> float:
        errors = [abs(r.error_pct) for r in self.micro_rows + self.layer_rows if r.group == group]
        return float(np.mean(errors))

    @property
    def groups(self) -> list[str]:
        return list(dict.fromkeys(r.group for r in self.micro_rows + self.layer_rows))


def _least_squares(residuals, start: list[float], lower: list[float], upper: list[float]) -> np.ndarray:
    from scipy.optimize import least_squares  # imported here: only calibration fits

    return least_squares(residuals, start, bounds=(lower, upper), x_scale="jac").x


def _rates(gpu: GpuProfile, **fractions: float) -> OpRates:
    """The GPU's OpRates with some fields set from candidate fractions (rates scale the bf16 or HBM peak)."""
    current = OpRates.of(gpu, "bf16")
    peak, hbm = gpu.dense_bf16_flops, gpu.hbm_bandwidth_Bps
    scaled = {"gemm_flops": peak, "gemm_Bps": hbm, "attention_flops": peak, "decode_attention_Bps": hbm}
    values = {name: getattr(current, name) for name in current.__slots__}
    values.update({name: scaled.get(name, 1.0) * value for name, value in fractions.items()})
    return OpRates(**values)


def _fit_gemm(gpu: GpuProfile, m: Measurements) -> tuple[np.ndarray, list[Row]]:
    def predict(x: np.ndarray) -> list[float]:
        rates = _rates(gpu, gemm_flops=x[0], gemm_Bps=x[1], gemm_blend=x[2])
        return [x[3] + gemm_seconds(rates, *gemm_cost(rates, r.M, r.K, r.N, BF16_BYTES)[:2]) for r in m.gemm]

    measured = np.array([r.seconds for r in m.gemm])
    start, lower, upper = [0.7, 0.8, 2.0, 1e-5], [0.05, 0.05, 1, 0], [1, 1, 8, 1e-3]
    x = _least_squares(lambda x: np.log(predict(x) / measured), start, lower, upper)
    rows = [Row("gemm", f"M={r.M} K={r.K} N={r.N}", r.seconds, p) for r, p in zip(m.gemm, predict(x))]
    return x, rows


def _fit_attention_prefill(gpu: GpuProfile, m: Measurements) -> tuple[np.ndarray, list[Row]]:
    def predict(x: np.ndarray) -> list[float]:
        rates = _rates(gpu, attention_flops=x[0], attention_half_tokens=x[1])
        out = []
        for r in m.attention_prefill:
            moved = r.S * (2 * r.heads + 2 * r.kv_heads) * r.head_dim * BF16_BYTES  # q, o, k, v once
            cost = prefill_attention_cost(rates, r.S * (r.S + 1) / 2, 4 * r.heads * r.head_dim, moved)
            out.append(x[2] + max(cost[0], cost[1]))
        return out

    measured = np.array([r.seconds for r in m.attention_prefill])
    x = _least_squares(lambda x: np.log(predict(x) / measured), [0.6, 1000.0, 1e-5], [0.05, 1.0, 0], [1, 1e5, 1e-3])
    rows = [Row("attention_prefill", f"S={r.S}", r.seconds, p) for r, p in zip(m.attention_prefill, predict(x))]
    return x, rows


def _fit_attention_decode(gpu: GpuProfile, m: Measurements) -> tuple[np.ndarray, list[Row]]:
    heads, kv_heads, head_dim = m.layer.heads, m.layer.kv_heads, m.layer.head_dim

    def predict(x: np.ndarray) -> list[float]:
        rates = _rates(gpu, decode_attention_Bps=x[0])
        out = []
        for r in m.attention_decode:
            moved = r.B * r.C * 2 * kv_heads * head_dim * BF16_BYTES + r.B * 2 * heads * head_dim * BF16_BYTES
            cost = decode_attention_cost(rates, r.B * r.C, 4 * heads * head_dim, moved)
            out.append(x[1] + max(cost[0], cost[1]))
        return out

    measured = np.array([r.seconds for r in m.attention_decode])
    x = _least_squares(lambda x: np.log(predict(x) / measured), [0.9, 1e-5], [0.05, 0], [1.2, 1e-3])
    rows = [Row("attention_decode", f"B={r.B} C={r.C}", r.seconds, p) for r, p in zip(m.attention_decode, predict(x))]
    return x, rows


def _fit_ops(gpu: GpuProfile, m: Measurements, source: str) -> tuple[Efficiency, list[Row], dict[str, float]]:
    gemm, gemm_rows = _fit_gemm(gpu, m)
    prefill, prefill_rows = _fit_attention_prefill(gpu, m)
    decode, decode_rows = _fit_attention_decode(gpu, m)
    copy_fraction = m.hbm_copy.bytes_moved / m.hbm_copy.seconds / gpu.hbm_bandwidth_Bps

    def fitted(value: float, group: str, rows: int) -> Constant:
        where = f"fit: {source} {group} ({rows} row{'s' * (rows != 1)})"
        return Constant(value=float(f"{value:.{SIGNIFICANT_DIGITS}g}"), source=where)

    efficiency = Efficiency(
        gemm_compute_fraction=fitted(gemm[0], "gemm", len(m.gemm)),
        gemm_bandwidth_fraction=fitted(gemm[1], "gemm", len(m.gemm)),
        gemm_blend_exponent=fitted(gemm[2], "gemm", len(m.gemm)),
        attention_compute_fraction=fitted(prefill[0], "attention_prefill", len(m.attention_prefill)),
        attention_half_tokens=fitted(prefill[1], "attention_prefill", len(m.attention_prefill)),
        attention_decode_bandwidth_fraction=fitted(decode[0], "attention_decode", len(m.attention_decode)),
        elementwise_bandwidth_fraction=fitted(copy_fraction, "hbm_copy", 1),
        # fp8 GEMMs are not in a bf16 layer measurement: keep what the profile has
        fp8_gemm_compute_fraction=gpu.efficiency.fp8_gemm_compute_fraction,
        fp8_gemm_bandwidth_fraction=gpu.efficiency.fp8_gemm_bandwidth_fraction,
        fp8_gemm_blend_exponent=gpu.efficiency.fp8_gemm_blend_exponent,
    )
    offsets = {"gemm": float(gemm[3]), "attention_prefill": float(prefill[2]), "attention_decode": float(decode[1])}
    return efficiency, gemm_rows + prefill_rows + decode_rows, offsets


def measured_layer_model(m: Measurements) -> ModelProfile:
    """The measured layer as a model of GRAPH_LAYERS identical layers (no vocabulary: `layers` is always given)."""
    shape = m.layer
    return ModelProfile(
        name=f"{shape.name}-measured-layer", description="the decoder layer of a measurement file",
        num_layers=GRAPH_LAYERS, hidden_size=shape.hidden, num_attention_heads=shape.heads,
        num_kv_heads=shape.kv_heads, head_dim=shape.head_dim, intermediate_size=shape.intermediate,
        vocab_size=1, max_context=1 << 24, dtype="bf16", kv_dtype="bf16",
    )


@dataclass(frozen=True)
class _LayerCase:
    group: str
    label: str
    measured_s: float
    batch: StepBatch
    style: LaunchStyle
    layers: int  # layers per measured replay; the row is the replay's time / layers


def _layer_cases(m: Measurements) -> list[_LayerCase]:
    eager, graph = LaunchStyle.EAGER, LaunchStyle.CUDA_GRAPH
    cases = [_LayerCase("layer_prefill_eager", f"T={r.tokens}", r.seconds,
                        StepBatch(chunks=(Chunk(r.tokens),)), eager, 1) for r in m.layer_prefill_eager]
    for group, rows, style, layers in (("layer_decode_eager", m.layer_decode_eager, eager, 1),
                                       ("layer_decode_cuda_graph", m.layer_decode_cuda_graph, graph, GRAPH_LAYERS)):
        # decode rows attend over their context plus the token they append
        cases += [_LayerCase(group, f"B={r.batch} C={r.context}", r.seconds,
                             StepBatch(decode_contexts=(r.context + 1,) * r.batch), style, layers) for r in rows]
    cases += [_LayerCase("layer_extend", f"T={r.new_tokens} C={r.context}", r.seconds,
                         StepBatch(chunks=(Chunk(r.new_tokens, r.context),)), eager, 1) for r in m.layer_extend]
    return cases


def _with_constants(gpu: GpuProfile, efficiency: Efficiency, launch: dict[LaunchStyle, LaunchCosts]) -> GpuProfile:
    return gpu.model_copy(update={"efficiency": efficiency, "launch": launch})


def _launch(gpu: GpuProfile, x: np.ndarray, source: str, digits: int = 17) -> dict[LaunchStyle, LaunchCosts]:
    eager, graph = gpu.launch[LaunchStyle.EAGER], gpu.launch[LaunchStyle.CUDA_GRAPH]
    eager_source = f"fit: {source} layer_prefill_eager, layer_decode_eager, layer_extend"

    def fitted(value: float, where: str) -> Constant:
        return Constant(value=float(f"{value:.{digits}g}"), source=where)

    return {
        LaunchStyle.EAGER: LaunchCosts(
            kernel_s=fitted(x[0], eager_source), step_s=eager.step_s, overlap_exponent=fitted(x[1], eager_source)
        ),
        LaunchStyle.CUDA_GRAPH: LaunchCosts(
            kernel_s=fitted(x[2], f"fit: {source} layer_decode_cuda_graph"),
            step_s=graph.step_s, overlap_exponent=graph.overlap_exponent,
        ),
    }


def _predict_layers(gpu: GpuProfile, model: ModelProfile, cases: list[_LayerCase]) -> list[float]:
    clocks = {layers: RooflineClock(gpu, model, layers=layers) for layers in {case.layers for case in cases}}
    return [clocks[case.layers].step_seconds(case.batch, case.style) / case.layers for case in cases]


def _fit_launch(
    gpu: GpuProfile, m: Measurements, efficiency: Efficiency, source: str, groups: set[str] | None = None
) -> tuple[GpuProfile, list[Row]]:
    """Launch costs from the layer rows (of `groups`, default all); returns the tuned GPU and every row."""
    model, cases = measured_layer_model(m), _layer_cases(m)
    fitted_cases = [case for case in cases if groups is None or case.group in groups]
    measured = np.array([case.measured_s for case in fitted_cases])

    def residuals(x: np.ndarray) -> np.ndarray:
        candidate = _with_constants(gpu, efficiency, _launch(gpu, x, source))
        return np.log(np.array(_predict_layers(candidate, model, fitted_cases)) / measured)

    x = _least_squares(residuals, [1e-5, 1.5, 3e-6], [0, 1, 0], [1e-3, 8, 1e-3])
    tuned = _with_constants(gpu, efficiency, _launch(gpu, x, source, digits=SIGNIFICANT_DIGITS))
    rows = [Row(c.group, c.label, c.measured_s, p) for c, p in zip(cases, _predict_layers(tuned, model, cases))]
    return tuned, rows


def calibrate(m: Measurements, gpu: GpuProfile, source: str = "measurements") -> Calibration:
    """Fit `gpu`'s constants on `m`; `source` names the file in every constant's provenance."""
    efficiency, micro_rows, offsets = _fit_ops(gpu, m, source)
    tuned, layer_rows = _fit_launch(gpu, m, efficiency, source)
    note = (f"fitted on {source}: op fractions on the microbenchmarks, launch costs on the layer rows "
            "(docs/roofline.md §Calibration)")
    return Calibration(tuned.model_copy(update={"calibration": note}), micro_rows, layer_rows, offsets)


def held_out_eager_mape(m: Measurements, calibration: Calibration, source: str = "measurements") -> dict[str, float]:
    """Out-of-sample check of the eager launch costs: refit them without one eager group, score that group."""
    eager_groups = {"layer_prefill_eager", "layer_decode_eager", "layer_extend"}
    out = {}
    for held_out in sorted(eager_groups):
        kept = (eager_groups - {held_out}) | {"layer_decode_cuda_graph"}
        _, rows = _fit_launch(calibration.gpu, m, calibration.gpu.efficiency, source, kept)
        out[held_out] = float(np.mean([abs(r.error_pct) for r in rows if r.group == held_out]))
    return out
