"""A plan's ports lie below the kernel's ephemeral range, where no outgoing connection can take them."""

from __future__ import annotations

import socket

from services.launcher.plan import build_plan, ephemeral_low, free_port
from services.scenario import load_scenario


def test_free_ports_are_below_the_ephemeral_range_distinct_and_bindable():
    ports = [free_port() for _ in range(200)]
    assert len(set(ports)) == len(ports)
    assert all(1024 <= p < ephemeral_low() for p in ports)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", ports[-1]))  # free when handed out, so a service can take it


def test_a_plans_ports_are_all_distinct_and_outside_the_ephemeral_range():
    plan = build_plan(load_scenario("pdd-mini", ()))
    ports = [p for s in plan.services for p in (s.http_port, s.grpc_port, s.kv_port, s.feed_port) if p]
    ports += [p for link in plan.links for p in (link.listen_port, link.control_port) if p]
    assert len(set(ports)) == len(ports) and all(p < ephemeral_low() for p in ports)


def test_grpc_across_datacenters_goes_through_a_shaped_control_link():
    from services.scenario.link_config import real_link_config

    plan = build_plan(load_scenario("pdd-mini", ["control_over_wan=true"]))
    main, relay = plan.service("main-decode"), plan.service("relay-decode")
    to_main = plan.grpc_address("main-decode", "router")
    link = next(l for l in plan.links if l.address == to_main)
    assert link.purpose == "control" and link.upstream_port == main.grpc_port and to_main != main.grpc_address
    assert plan.grpc_address("relay-decode", "main-decode") != relay.grpc_address  # handoffs cross it too
    assert plan.grpc_address("relay-decode", "router") == relay.grpc_address  # same datacenter: direct
    feed = next(l for l in plan.links if l.address == plan.feed_address("main-decode", "router"))
    assert feed.purpose == "control" and feed.upstream_port == main.feed_port and feed is not link
    assert plan.feed_address("relay-decode", "router") == f"{relay.host}:{relay.feed_port}"
    config = real_link_config(link, plan.scenario.byte_scale)
    assert config.up.delay_s == plan.scenario.wan.delay_s and config.up.rate_bps == plan.scenario.wan.rate_bps


def test_a_plan_inside_one_datacenter_has_no_control_links():
    plan = build_plan(load_scenario("pd-intra-mini", ()))
    assert [l for l in plan.links if l.purpose == "control"] == []
