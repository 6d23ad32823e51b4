"""The fp8 GEMM fractions fitted on DeepGEMM's published H800 table (docs/roofline.md §Borrowed fractions).

    fractions, errors = fit_fp8_gemm()      # (compute, bandwidth, blend exponent), per-row errors

Each row is timed through the same op functions the clock uses (roofline_ops.gemm_cost and
gemm_seconds), a grouped GEMM as one GEMM of M x groups tokens over `groups` weight matrices;
the fit minimises the squared log errors, as the dense calibration does (roofline_fit.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from services.engine.roofline_ops import ACTIVATION_BYTES, OpRates, gemm_seconds
from services.profiles import MEASUREMENTS_DIR, load_gpu

DEEPGEMM_TABLE = MEASUREMENTS_DIR / "deepgemm-h800-fp8.json"
FP8_BYTES = 1


def _rows() -> tuple[str, list[dict]]:
    table = json.loads(DEEPGEMM_TABLE.read_text())
    return table["gpu"], table["gemm"]


def _predicted_s(rates: OpRates, row: dict) -> float:
    m, k, n, groups = row["M"] * row["groups"], row["K"], row["N"], row["groups"]
    compute_s = 2.0 * m * k * n / rates.gemm_flops
    memory_s = (groups * k * n * FP8_BYTES + m * k * FP8_BYTES + m * n * ACTIVATION_BYTES) / rates.gemm_Bps
    return gemm_seconds(rates, compute_s, memory_s)


def fit_fp8_gemm() -> tuple[tuple[float, float, float], list[float]]:
    """(compute fraction, bandwidth fraction, blend exponent) and each row's relative error."""
    gpu_name, rows = _rows()
    gpu = load_gpu(gpu_name)
    base = OpRates.of(gpu, "bf16")
    measured = [2.0 * r["M"] * r["groups"] * r["K"] * r["N"] / (r["TFLOPs"] * 1e12) for r in rows]

    def rates(x: np.ndarray) -> OpRates:
        return replace(base, gemm_flops=gpu.dense_fp8_flops * x[0], gemm_Bps=gpu.hbm_bandwidth_Bps * x[1],
                       gemm_blend=x[2])

    def residuals(x: np.ndarray) -> list[float]:
        return [math.log(_predicted_s(rates(x), r) / t) for r, t in zip(rows, measured)]

    fit = least_squares(residuals, [0.7, 0.8, 2.6], bounds=([0.1, 0.1, 1.0], [1.0, 1.2, 10.0]))
    return tuple(float(v) for v in fit.x), [math.exp(r) - 1.0 for r in residuals(fit.x)]
