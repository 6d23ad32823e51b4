"""The compose plan: pools on their containers, fixed ports, and every cross-datacenter byte through wan-link."""

from __future__ import annotations

import pytest

from services.launcher.compose_plan import (
    FEED_PORT, GRPC_PORT, WAN_LINK, ComposePlanError, build_compose_plan, links_on, service_on,
)
from services.scenario import load_scenario
from services.types import Role


@pytest.fixture(params=["pd-cross-mini", "pdd-mini", "pdd-kvship-mini"])
def plan(request):
    return build_compose_plan(load_scenario(request.param))


def test_pools_keep_their_names_and_run_in_the_container_of_their_tier():
    plan = build_compose_plan(load_scenario("pd-cross-mini"))
    decode = plan.service("decode")
    assert decode.host == "main-decode" and decode.role is Role.DECODE
    assert service_on(plan, "main-decode") == decode and service_on(plan, "prefill").host == "prefill"
    assert service_on(plan, "relay-decode") is None  # pd-cross leaves that container empty
    pdd = build_compose_plan(load_scenario("pdd-mini"))
    assert {s.name: s.host for s in pdd.services} == {
        "router": "router", "prefill": "prefill", "relay-decode": "relay-decode", "main-decode": "main-decode"}
    assert all(s.bind_host == "0.0.0.0" for s in pdd.services)


def test_every_route_between_datacenters_goes_through_wan_link(plan):
    for consumer in plan.services:
        for target in plan.services:
            if not target.grpc_port or target.name == consumer.name:
                continue
            address = plan.grpc_address(target.name, consumer.name)
            feed = plan.feed_address(target.name, consumer.name) if target.feed_port else None
            if consumer.dc == target.dc:
                assert address == f"{target.host}:{GRPC_PORT}"
                assert feed in (None, f"{target.host}:{FEED_PORT}")
            else:
                assert address.startswith(f"{WAN_LINK}:"), (consumer.name, target.name, address)
                assert feed is None or feed.startswith(f"{WAN_LINK}:") and feed != address  # a route of its own
    for link in plan.links:
        if link.purpose == "kv":
            src, dst = plan.service(link.src), plan.service(link.dst)
            assert (link.runner == WAN_LINK) == (src.dc != dst.dc)
            assert link.host == link.runner and link.upstream == f"{dst.host}:{dst.kv_port}"


def test_link_ports_never_collide_and_control_routes_carry_the_wan_delay(plan):
    ports = [p for link in plan.links for p in (link.listen_port, link.control_port)]
    assert len(ports) == len(set(ports)) and all(p > 0 for p in ports)
    control = [link for link in plan.links if link.purpose == "control"]
    assert control and all(l.runner == WAN_LINK and l.spec.delay_s == plan.scenario.wan.delay_s for l in control)


def test_pdd_has_the_four_cross_datacenter_grpc_paths():
    plan = build_compose_plan(load_scenario("pdd-kvship-mini"))
    routed = {(plan.service(c).dc, t) for c, t in [("router", "main-decode"), ("prefill", "main-decode"),
                                                    ("main-decode", "relay-decode"), ("relay-decode", "main-decode")]}
    control = {(l.src, l.dst) for l in links_on(plan, WAN_LINK) if l.purpose == "control"}
    assert routed <= control
    assert {l.name for l in links_on(plan, WAN_LINK) if l.purpose == "kv"} == {
        "prefill-to-main-decode", "relay-decode-to-main-decode"}
    assert [l.name for l in links_on(plan, "rdma-link")] == ["prefill-to-relay-decode"]


@pytest.mark.parametrize("scenario, overrides, message", [
    ("pd-intra-mini", [], "compose runs the cross-datacenter modes"),
    ("colocated-mini", [], "run it with `pdd-emu up`"),
])
def test_scenarios_that_do_not_fit_are_refused_with_a_reason(scenario, overrides, message):
    with pytest.raises(ComposePlanError, match=message):
        build_compose_plan(load_scenario(scenario, overrides))


def test_a_pool_outside_its_containers_datacenter_is_refused():
    scenario = load_scenario("pd-cross-mini")
    relay = scenario.pools[0].model_copy(update={"name": "relay", "role": Role.RELAY_DECODE, "dc": "dc-b"})
    with pytest.raises(ComposePlanError, match="must sit in prefill's datacenter"):
        build_compose_plan(scenario.model_copy(update={"pools": (*scenario.pools, relay)}))


def test_two_pools_of_one_tier_are_refused():
    scenario = load_scenario("pdd-mini")
    second = scenario.pools[0].model_copy(update={"name": "prefill-b"})
    crowded = scenario.model_copy(update={"pools": (*scenario.pools, second)})
    with pytest.raises(ComposePlanError, match="both need container prefill"):
        build_compose_plan(crowded)


def test_the_example_scenario_file_for_containers_plans():
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "compose" / "scenarios" / "pdd-long-haul.yaml"
    plan = build_compose_plan(load_scenario(str(example)))
    assert plan.scenario.wan.delay_s == pytest.approx(0.04) and plan.scenario.wan.jitter_dist == "uniform"
