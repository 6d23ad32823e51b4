"""The mesh plan of a scenario: its control links across datacenters."""

from __future__ import annotations

import itertools

from services.scenario import load_scenario
from services.scenario.plan import plan_mesh


def test_grpc_across_datacenters_gets_the_wans_propagation_and_nothing_of_its_bulk_perturbations():
    scenario = load_scenario("pdd-mini", ["wan.delay_s=20ms", "wan.jitter_s=5ms", "wan.loss=0.1%",
                                          "wan.window_bytes=3MiB", "control_over_wan=true"])
    ports = itertools.count(1)
    plan = plan_mesh(scenario, "h", lambda: next(ports))
    control = [link for link in plan.links if link.purpose == "control"]
    assert {(link.src, link.dst, link.upstream_port) for link in control} == {
        (caller.dc, target.name, port) for caller in plan.services for target in plan.services
        for port in (target.grpc_port, target.feed_port) if port and target.dc != caller.dc}
    assert all(s.feed_port for s in plan.services if s.role.value.endswith("decode"))  # every decode pool's feed
    for link in control:
        assert link.spec.delay_s == 0.02 and link.spec.rate_bps == scenario.wan.rate_bps
        assert link.spec.jitter_s == 0.0 and link.spec.loss == 0.0 and link.spec.schedule is None
        assert link.spec.window_bytes is None
    kv = next(link for link in plan.links if link.purpose == "kv" and link.kind == "wan")
    assert kv.spec.jitter_s == 0.005 and kv.spec.loss == 0.001  # the KV stream keeps them
    assert kv.spec.window_bytes == 3 * 2**20


def test_by_default_grpc_goes_directly_between_datacenters():
    ports = itertools.count(1)
    plan = plan_mesh(load_scenario("pdd-mini"), "h", lambda: next(ports))
    assert [link for link in plan.links if link.purpose == "control"] == []
    assert plan.grpc_address("main-decode", "router") == plan.service("main-decode").grpc_address
