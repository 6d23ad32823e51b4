import pytest

from loadgen.stats import describe, percentile
from loadgen.summary import SlaConfig, meets_sla, summarize


def record(i: int, status="ok", ttft=0.5, tpot=0.05, tokens=11, send=None, hit=0.97, pdd=None, error=None,
           elapsed=None) -> dict:
    e2e = None if status != "ok" else ttft + tpot * (tokens - 1)
    return {
        "id": f"r{i}", "session": None, "turn": 0, "send_s": float(i) if send is None else send, "send_unix": 0.0,
        "prompt_tokens": 1000, "max_tokens": tokens, "hit_rate": hit, "target_hit_rate": None, "status": status,
        "error": error, "http_status": 200, "output_tokens": tokens if status == "ok" else 0,
        "ttft_s": ttft if status != "timeout" else None, "tpot_s": tpot if status == "ok" else None, "e2e_s": e2e,
        "itl_s": [tpot] * (tokens - 1) if status == "ok" else [], "finish_reason": "length", "usage": None,
        "pdd": pdd, "elapsed_s": elapsed if elapsed is not None else (e2e or 0.0),
    }


def test_percentiles_interpolate_linearly_between_order_statistics():
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    # rank h = (n - 1) p = 3.6 for p90: x3 + 0.6 (x4 - x3) = 4 + 0.6 * 6
    assert percentile(values, 0.9) == pytest.approx(7.6)
    assert percentile(values, 0.5) == 3.0
    assert percentile([], 0.5) is None
    summary = describe(values + [None])
    assert (summary.count, summary.p50, summary.max, summary.mean) == (5, 3.0, 10.0, 4.0)
    assert summary.p99 == pytest.approx(4 + 0.96 * 6)


def test_sla_needs_both_limits_and_forgives_a_missing_tpot():
    sla = SlaConfig(ttft_s="1s", tpot_s="100ms")
    assert meets_sla(record(0), sla)
    assert not meets_sla(record(0, ttft=1.5), sla)
    assert not meets_sla(record(0, tpot=0.2), sla)
    assert meets_sla(record(0, tokens=1) | {"tpot_s": None}, sla)
    assert not meets_sla(record(0, status="error"), sla)


def test_summary_counts_goodput_shares_and_bcr():
    pdd = {"mode": "pdd", "pipeline": "P-RLD-MD", "rld_tokens": 2, "md_tokens": 8, "wan_bytes": 1000,
           "prefill_hit_tokens": 900, "decode_hit_tokens": 950}
    records = [
        record(0, pdd=pdd, hit=0.5),
        record(1, pdd=pdd | {"pipeline": "P-MD", "rld_tokens": 0, "md_tokens": 10}),
        record(2, ttft=3.0, pdd=pdd | {"pipeline": "P-MD", "rld_tokens": 0, "md_tokens": 10}),  # misses the TTFT limit
        record(3, status="error", error="http_503: HTTP 503: no capacity"),
        record(4, status="timeout", error="no complete answer within 3s", elapsed=3.0),
        record(5, status="cancelled", error="run interrupted"),
    ]
    summary = summarize(records, sla=SlaConfig(ttft_s=2.0, tpot_s=0.1), workload="agentic", offered_rate=2.0,
                        cost_per_hour=4.0)
    assert (summary.sent, summary.completed, summary.failed, summary.cancelled) == (6, 3, 2, 1)
    assert summary.within_sla == 2
    assert summary.sla_attainment == pytest.approx(2 / 5)
    # window: run start to the last end, the timeout's deadline: sent at 4 s, given up at 7 s
    assert summary.window_s == pytest.approx(7.0)
    assert summary.goodput_rps == pytest.approx(2 / 7.0)
    assert summary.bcr == pytest.approx(summary.goodput_rps / 4.0)
    assert summary.rld_token_share == pytest.approx(2 / 30)
    assert summary.wan_bytes == 3000
    assert summary.pipelines == {"P-RLD-MD": 1, "P-MD": 2}
    assert summary.errors == {"http_503": 1, "timeout": 1}
    assert summary.label == "pdd" and summary.mode == "pdd"
    assert summary.hit_rate_bins["0-90"] == pytest.approx(1 / 5)
    assert summary.hit_rate_bins["97-98"] == pytest.approx(4 / 5)
    assert summary.server_hit_rate_mean == pytest.approx(0.95)
    assert summary.ttft_s.p50 == 0.5 and summary.ttft_s.count == 3
    assert summary.itl_s.count == 30


def test_summary_of_nothing_is_empty_not_an_error():
    summary = summarize([], sla=SlaConfig(), workload="poisson")
    assert summary.sent == 0 and summary.goodput_rps == 0.0 and summary.ttft_s.p50 is None
    assert summary.rld_token_share is None and summary.label == "run"
