"""What a failed soak prints about its failures, without a mesh: Locust's errors and the mesh's warnings."""

from services.chaos.soak import SoakReport, failure_reasons, mesh_warnings


def test_failure_reasons_are_counted_most_frequent_first(tmp_path):
    table = tmp_path / "locust_failures.csv"
    table.write_text("Method,Name,Error,Occurrences,First Seen,Last Seen\n"
                     "E2E,/v1/completions,StreamError('HTTP 503: draining'),1,0,0\n"
                     "POST,/v1/completions,CatchResponseError('HTTP 503: draining'),1,0,0\n"
                     "E2E,/v1/completions,\"StreamError('no complete answer within 60s')\",3,0,0\n")
    assert failure_reasons(table) == ["3 x StreamError('no complete answer within 60s')",
                                      "1 x StreamError('HTTP 503: draining')"]  # the POST's copy left out
    assert failure_reasons(tmp_path / "absent.csv") == []


def test_mesh_warnings_keep_the_last_flagged_lines_of_each_log(tmp_path):
    (tmp_path / "router.log").write_text(
        "t router INFO aiohttp.access: POST 200\n"
        + "".join(f"t router WARNING services.router.feed: s{i}-t0 lost its stream\n" for i in range(7))
        + "t router ERROR services.router.app: s9-t0 failed\n")
    (tmp_path / "prefill.log").write_text("t prefill INFO services.kv.shipper: s1-t0: transfer cancelled\n")
    (tmp_path / "locust.log").write_text("[t] host/WARNING/locustfile: s3-t2 failed: HTTP 502\n")
    found = mesh_warnings(tmp_path, shown=3)
    assert set(found) == {"router", "locust"}  # prefill logged nothing flagged
    assert found["router"] == ["t router WARNING services.router.feed: s5-t0 lost its stream",
                               "t router WARNING services.router.feed: s6-t0 lost its stream",
                               "t router ERROR services.router.app: s9-t0 failed"]
    assert found["locust"] == ["[t] host/WARNING/locustfile: s3-t2 failed: HTTP 502"]


def test_the_text_shows_reasons_and_warnings_beside_the_violation():
    report = SoakReport(300, 6, 1253, 1, 4.18, {"p50": 58.0, "p99": 750.0}, {},
                        violations=["1 of 1253 requests failed"], failure_reasons=["1 x HTTP 502: upstream"],
                        mesh_warnings={"router": ["t router WARNING x: s4-t1 lost"]})
    text = report.to_text()
    assert "VIOLATED" in text
    assert "  failed: 1 x HTTP 502: upstream" in text
    assert "  router logged:\n    t router WARNING x: s4-t1 lost" in text
