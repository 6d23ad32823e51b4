"""Three deployments' request records, shaped like a demo's: pd-intra, WAN-bound pd-cross, and pdd with a relay.

Every record follows the router's stamps (received, prefill_sent, prefill_done,
relay_kv_arrived, kv_arrived, first_token, handoff_started, handoff_done,
finished). pd-cross's slow requests wait on the KV crossing the WAN; pdd's
relay answers those while the KV crosses, then hands off; a few short answers
end on the relay (P-RLD). TTFTs span two decades, as the demo's do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from loadgen.report.runs import RunData
from loadgen.summary import SlaConfig, summarize

SEND0 = 1_000.0


def _record(i: int, stamps: dict[str, float], tokens: int, hit: float, pdd: dict) -> dict:
    send = SEND0 + i
    ttft = stamps["first_token"]
    itl = [0.01] * (tokens - 1)
    return {"id": f"r{i}", "session": f"s{i % 5}", "turn": i // 5, "send_s": float(i), "send_unix": send,
            "prompt_tokens": 8192, "max_tokens": tokens, "hit_rate": hit, "target_hit_rate": hit, "status": "ok",
            "error": None, "http_status": 200, "output_tokens": tokens, "ttft_s": ttft, "tpot_s": 0.01,
            "e2e_s": ttft + sum(itl), "itl_s": itl, "finish_reason": "length", "usage": None,
            "pdd": {**pdd, "timeline": {name: send + t for name, t in stamps.items()}}}


def _plain(i: int, prefill_s: float, transfer_s: float, wan: bool, hit: float, tokens: int = 40,
           pipeline: str = "P-D") -> dict:
    stamps = {"received": 0.002, "prefill_sent": 0.005, "prefill_done": 0.005 + prefill_s}
    stamps["kv_arrived"] = stamps["prefill_done"] + transfer_s
    stamps["first_token"] = stamps["kv_arrived"] + 0.008
    stamps["finished"] = stamps["first_token"] + 0.01 * (tokens - 1)
    pdd = {"pipeline": pipeline, "wan_bytes": int(transfer_s * 1.25e9) if wan else 0, "kv_transfer_s": transfer_s,
           "rld_tokens": 0, "md_tokens": tokens, "handoff": None}
    return _record(i, stamps, tokens, hit, pdd)


def _relayed(i: int, prefill_s: float, transfer_s: float, hit: float, tokens: int = 60) -> dict:
    stamps = {"received": 0.002, "prefill_sent": 0.005, "prefill_done": 0.005 + prefill_s}
    stamps["relay_kv_arrived"] = stamps["prefill_done"] + 0.004
    stamps["first_token"] = stamps["relay_kv_arrived"] + 0.006
    stamps["kv_arrived"] = stamps["prefill_done"] + transfer_s
    relay_tokens = min(tokens, int((stamps["kv_arrived"] - stamps["first_token"]) / 0.01) + 1)
    if relay_tokens >= tokens:  # the answer ended before main decode could take over: P-RLD
        stamps["finished"] = stamps["first_token"] + 0.01 * (tokens - 1)
        pdd = {"pipeline": "P-RLD", "wan_bytes": 0, "kv_transfer_s": 0.0, "rld_tokens": tokens, "md_tokens": 0,
               "handoff": None}
        return _record(i, stamps, tokens, hit, pdd)
    stamps["handoff_started"] = stamps["kv_arrived"] + 0.001
    stamps["handoff_done"] = stamps["handoff_started"] + 0.03
    stamps["finished"] = stamps["first_token"] + 0.01 * (tokens - 1) + 0.03
    pdd = {"pipeline": "P-RLD-MD", "wan_bytes": int(transfer_s * 1.25e9), "kv_transfer_s": transfer_s,
           "rld_tokens": relay_tokens, "md_tokens": tokens - relay_tokens,
           "handoff": {"mode": "catch-up", "chunks": 2, "stall_s": 0.03, "cut": relay_tokens}}
    return _record(i, stamps, tokens, hit, pdd)


def comparison_runs(folder: Path = Path("runs")) -> list[RunData]:
    rng = np.random.default_rng(5)
    hits = rng.choice([0.0, 0.95, 0.99, 1.0], size=40, p=[0.2, 0.3, 0.3, 0.2])
    prefill = [0.02 + 0.3 * (1 - h) + 0.004 * (i % 5) for i, h in enumerate(hits)]
    transfer = [0.002 + 2.5 * (1 - h) for h in hits]
    records = {
        "pd-intra": [_plain(i, p, 0.001, False, h) for i, (p, h) in enumerate(zip(prefill, hits))],
        "pd-cross": [_plain(i, p, t, True, h) for i, (p, t, h) in enumerate(zip(prefill, transfer, hits))],
        "pdd": [_relayed(i, p, t, h, tokens=60 if i % 2 else 400) if h < 0.5
                else _plain(i, p, t, True, h, pipeline="P-MD")
                for i, (p, t, h) in enumerate(zip(prefill, transfer, hits))],
    }
    costs = {"pd-intra": 11.96, "pd-cross": 13.56, "pdd": 16.55}
    runs = []
    for mode, rows in records.items():
        summary = summarize(rows, sla=SlaConfig(ttft_s=5.0, tpot_s=0.1), workload="agentic:context=8K",
                            offered_rate=1.0, label=mode, cost_per_hour=costs[mode])
        runs.append(RunData(folder / mode, summary.model_copy(update={"mode": mode}), rows))
    return runs
