"""What the PDD report states: its setup (which the experiments scale) and its results (shown beside ours).

The results below are never read to configure a run; they only fill the
"paper" column of the comparison tables (docs/results.md). Source:
docs/pdd-system.md, "Results reported" (arXiv 2609.13161).
"""

from __future__ import annotations

# --- setup: what the report ran (used for scaling) --------------------------------------------
SETUP_RATE_RPS = 80.0  # the WAN microbenchmark's load
SETUP_LINE_BPS = 20e9  # "about 20 Gbps"
SETUP_CONTEXT_TOKENS = 65536
SETUP_MEAN_HIT = 0.90
SETUP_GPUS_BASELINE_A = 88
SETUP_GPUS_PDD_A = 43
SETUP_GPUS_PDD_B = 32
HANDOFF_TOKENS = 100

# --- results: only ever compared with ---------------------------------------------------------
TTFT_S = {  # P50, P90, P99
    "pd-cross": (6.7, 18.3, 29.7),
    "pd-intra": (3.9, 10.4, 17.2),
    "pdd": (4.2, 9.8, 14.4),
}
GOODPUT_RPS = {"pd-intra": 9.0, "pdd": 11.5}
TTFT_P99_REDUCTION = 0.515  # PDD against cross-DC PD
GOODPUT_GAIN = 0.278  # PDD against the intra-DC baseline
COST_REDUCTION = (0.035, 0.071)
BCR_GAIN = (0.324, 0.375)
RLD_TOKEN_SHARE = 0.062
HANDOFF = {
    "token_ids": {"mean_s": 0.305, "max_s": 0.3214, "std_s": 0.0048},
    "kv_ship": {"mean_s": 0.185, "max_s": 0.5126, "std_s": None},  # not reported
}
WAN = {"skewed": {"p50_s": 0.248, "p99_s": 18.9}, "narrow": {"p50_s": 1.21, "p99_s": 25.5}}
BATHTUB_DIPS = (0.20, 0.40, 0.70)  # "about"; their context and chunk sizes are not given
