"""Notes beside the mini-scale report: a gap from the PDD report gets its mechanism, agreement gets no note."""

from loadgen.report.runs import RunData
from services.experiments import reported
from services.experiments.scale_notes import mini_scale_notes, relay_note
from tests.loadgen.comparison import comparison_runs


def test_a_large_relay_share_names_the_requests_that_finished_on_the_relay():
    runs = comparison_runs()
    pdd = runs[2]
    finished_there = sum(r["pdd"]["pipeline"] == "P-RLD" for r in pdd.ok_records())
    assert finished_there > 0 and pdd.summary.rld_token_share > 2 * reported.RLD_TOKEN_SHARE
    note = relay_note(runs)
    assert f"{pdd.summary.rld_token_share:.0%} of pdd's output tokens" in note
    assert f"{finished_there} finished there (pipeline P-RLD)" in note and "6.2%" in note


def test_a_relay_share_near_the_reports_gets_no_note():
    runs = comparison_runs()
    pdd = runs[2]
    near = pdd.summary.model_copy(update={"rld_token_share": 0.07})
    runs[2] = RunData(pdd.path, near, pdd.records)
    assert relay_note(runs) is None


def test_the_table_and_the_cdf_get_their_notes():
    notes = mini_scale_notes(comparison_runs())
    assert "pdd costs 38% more per hour than pd-intra" in notes["table"]
    assert "29.7 s" in notes["ttft_cdf"] and "1 req/s" in notes["ttft_cdf"]
