"""Why a mini-scale comparison differs from the PDD report: one sentence beside each figure that differs.

`pdd-emu demo` runs Llama-3-8B meshes at about one request per second; the
report ran a 1T-class model with 64K contexts at 80 req/s on a 20 Gbit/s line
(reported.py). Each note compares a figure of these runs with the report's and
names the mechanism behind the gap, from the runs' own records; a figure that
agrees gets no note. Keys are the report page's (loadgen/report/captions.py).
"""

from __future__ import annotations

import statistics

from loadgen.report.runs import RunData
from services.experiments import reported

SINGULAR_SHARE_REPORTED = "3-4%"  # docs/pdd-system.md, "Singular traffic filter"; reported.py has no field for it
LARGE_GAP = 2.0  # a share this many times the report's (or less than its inverse) earns a note


def _by_mode(runs: list[RunData]) -> dict[str, RunData]:
    return {run.summary.mode or run.label: run for run in runs}


def ttft_note(runs: list[RunData]) -> str | None:
    """Seconds against seconds: the report's queues are long, these are not."""
    p99 = {mode: run.summary.ttft_s.p99 for mode, run in _by_mode(runs).items() if run.summary.ttft_s.p99}
    if not p99:
        return None
    theirs = ", ".join(f"{mode} {reported.TTFT_S[mode][2]:g} s" for mode in p99 if mode in reported.TTFT_S)
    ours = ", ".join(f"{mode} {value:.2g} s" for mode, value in p99.items())
    rate = runs[0].summary.offered_rate
    load = f"{rate:g} req/s" if rate is not None else "a light load"
    return (f"TTFT P99 here: {ours}; in the PDD report: {theirs}. The report served "
            f"{reported.SETUP_CONTEXT_TOKENS // 1024}K-token contexts at {reported.SETUP_RATE_RPS:g} req/s, so its "
            f"requests queued for seconds; these meshes serve {load} of a small model, so only the order of the "
            f"deployments and their tails compare, not the seconds.")


def relay_note(runs: list[RunData]) -> str | None:
    """A relay share far from the report's 6.2%, and the singular early finishes behind it."""
    pdd = _by_mode(runs).get("pdd")
    share = pdd.summary.rld_token_share if pdd else None
    if not share or 1 / LARGE_GAP <= share / reported.RLD_TOKEN_SHARE <= LARGE_GAP:
        return None
    ok = pdd.ok_records()
    singular = [r for r in ok if (r.get("pdd") or {}).get("pipeline") == "P-RLD"]
    relayed = [r for r in ok if (r.get("pdd") or {}).get("rld_tokens")]
    note = (f"RLD generated {share:.0%} of pdd's output tokens here, {reported.RLD_TOKEN_SHARE:.1%} in the report. "
            f"{len(relayed)} of {len(ok)} requests started on the relay")
    if singular:
        decode = statistics.median(r["e2e_s"] - r["ttft_s"] for r in singular)
        tokens = statistics.median(r["output_tokens"] for r in singular)
        note += (f", and {len(singular)} finished there (pipeline P-RLD): their answers were short (median "
                 f"{tokens:.0f} tokens, {decode:.2f} s of decoding) and ended before main decode took over, "
                 f"the singular early finish that the report saw in about {SINGULAR_SHARE_REPORTED} of requests")
    return note + "."


def cost_note(runs: list[RunData]) -> str | None:
    """PDD dearer than the baseline: the mini presets add pools rather than replace GPUs."""
    modes = _by_mode(runs)
    intra, pdd = modes.get("pd-intra"), modes.get("pdd")
    if not intra or not pdd or not intra.summary.cost_per_hour or not pdd.summary.cost_per_hour:
        return None
    extra = pdd.summary.cost_per_hour / intra.summary.cost_per_hour - 1
    if extra <= 0:
        return None
    return (f"pdd costs {extra:.0%} more per hour than pd-intra here: the mini presets keep the same prefill "
            f"and decode pools in every mode, so pdd pays for its relay instance, H200s for main decode and the "
            f"WAN line on top. The report's PDD replaced {reported.SETUP_GPUS_BASELINE_A} GPU-A with "
            f"{reported.SETUP_GPUS_PDD_A} GPU-A and {reported.SETUP_GPUS_PDD_B} GPU-B and cost "
            f"{reported.COST_REDUCTION[0]:.1%} to {reported.COST_REDUCTION[1]:.1%} less. Which deployment pays "
            f"at equal cost is the planner's question: pdd-emu experiment economics.")


def mini_scale_notes(runs: list[RunData]) -> dict[str, str]:
    """The notes for build_report: key (table or figure stem) to the sentences that belong beside it."""
    table = [note for note in (cost_note(runs), relay_note(runs)) if note]
    notes = {"table": " ".join(table)} if table else {}
    ttft = ttft_note(runs)
    if ttft:
        notes["ttft_cdf"] = ttft
    return notes
