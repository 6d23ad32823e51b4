"""The prefill service in the in-process mesh: streamed KV shortens TTFT by its overlap with prefill,
a failed prefill stops its streams, and no announce precedes a transfer."""

from __future__ import annotations

import asyncio

import grpc
import pytest

from services.kv.transfers import TransferFailed
from services.router.policy_stream import PrefillChunks, streamed_wait_s
from services.rpc import pb
from services.rpc.ids import pack_ids
from services.scenario.loader import load_scenario
from services.simulate.census import MessageCensus
from services.simulate.clock import run_virtual
from services.simulate.run import run_simulation
from services.simulate.wiring import SimulatedMesh, simulated_plan
from tests.tolerance import assert_at_most, assert_close

PROMPT = 32768  # 4 GiB of llama3-8b KV: 3.4 s over the 10 Gbit/s WAN, 1.2 s of prefill on an H100
WORKLOAD = f"poisson:input={PROMPT},output=4"


def _run(preset: str, streaming: bool, workload: str = WORKLOAD, duration_s: float = 20.0):
    scenario = load_scenario(preset, [f"kv_streaming={str(streaming).lower()}", "wan.jitter_s=0"])
    run = run_simulation(scenario, workload, rate=0.2, duration_s=duration_s, seed=1, stats_every_s=5.0)
    assert run.records and all(r.status == "ok" for r in run.records), [r.error for r in run.records]
    return scenario, run


def test_streamed_kv_reaches_decode_earlier_by_its_overlap_with_prefill():
    scenario, on = _run("pd-cross-mini", streaming=True)
    _, off = _run("pd-cross-mini", streaming=False)
    parts = PrefillChunks(scenario).parts(0, PROMPT, 131072)
    wan = scenario.wan
    whole_wait, streamed_wait = wan.delay_s + PROMPT * 131072 * 8 / wan.rate_bps, streamed_wait_s(wan, parts, 0)
    assert streamed_wait < whole_wait - 0.5  # what the formula says streaming hides: about 1 s here
    for a, b in zip(on.records, off.records, strict=True):
        prefill_s = a.pdd["timeline"]["prefill_done"] - a.pdd["timeline"]["received"]
        assert_close(prefill_s, parts[-1][0], rel=0.05, what="prefill time as the roofline predicts it")
        assert_close(b.pdd["kv_transfer_s"], whole_wait, rel=0.05, what="whole KV after prefill")
        # kv_transfer_s is the wait after prefill: only what the overlap did not hide (frames: 256 KiB steps).
        assert_close(a.pdd["kv_transfer_s"], streamed_wait, rel=0.1, what="exposed streamed transfer")
        assert_close(b.ttft_s - a.ttft_s, whole_wait - streamed_wait, rel=0.1, what="TTFT saved")
        assert a.output_tokens == b.output_tokens == 4
    stats = on.snapshots[-1][1]
    assert stats["prefill"]["kv_bytes_sent"] == stats["decode"]["kv_bytes_received"] == \
        off.snapshots[-1][1]["decode"]["kv_bytes_received"] > 0


@pytest.mark.parametrize("streaming", [True, False])
def test_a_request_finished_on_the_relay_stops_its_wan_transfer_mid_stream(streaming):
    _, run = _run("pdd-mini", streaming, workload=f"poisson:input={PROMPT},output=2", duration_s=15.0)
    assert all(r.pdd["singular"] for r in run.records)
    stats = run.snapshots[-1][1]
    assert stats["prefill"]["transfers_cancelled"] == len(run.records)
    relay, main = stats["relay-decode"]["kv_bytes_received"], stats["main-decode"]["kv_bytes_received"]
    assert relay > 0 and stats["prefill"]["kv_bytes_sent"] == relay + main
    # Streamed, the WAN carried what the prefill had computed before the relay finished; never all of it.
    assert_at_most(main, 0.5 * relay, what="WAN bytes of the cancelled transfers")


def test_main_decode_takes_over_once_its_streamed_kv_has_landed():
    scenario, run = _run("pdd-mini", True, workload="poisson:input=65536,output=1024", duration_s=15.0)
    parts = PrefillChunks(scenario).parts(0, 65536, 131072)
    (record,) = run.records
    timeline = record.pdd["timeline"]
    assert record.pdd["pipeline"] == "P-RLD-MD" and record.pdd["handoff"] is not None
    # Main decode's KV was usable when the formula says (prefill, then the part streaming did not hide).
    assert_close(timeline["kv_arrived"] - timeline["prefill_done"], streamed_wait_s(scenario.wan, parts, 0),
                 rel=0.05, what="main decode's wait after prefill")
    assert timeline["handoff_started"] >= timeline["kv_arrived"]  # the handoff waited for that KV
    assert_close(record.pdd["policy"]["estimate_s"], record.pdd["kv_transfer_s"], rel=0.05,
                 what="the router's streamed estimate against the measured wait")


@pytest.mark.parametrize("streaming", [False, True])
def test_a_dual_path_prefill_makes_no_announce_and_each_receiver_learns_its_transfer_from_the_last_frame(
        streaming):
    async def body():
        scenario = load_scenario("pdd-mini", [f"kv_streaming={str(streaming).lower()}"])
        async with SimulatedMesh(simulated_plan(scenario)) as mesh:
            census = MessageCensus(mesh)
            receivers = [mesh.servicers[name] for name in ("main-decode", "relay-decode")]
            waiting = [asyncio.ensure_future(r.transfers.wait("r1", 60.0)) for r in receivers]
            request = pb.PrefillRequest(request_id="r1", prompt_ids=pack_ids(list(range(1, 20000))), seed=1,
                                        kv_target="main-decode", receiver_hit_tokens=4096,
                                        kv_target_secondary="relay-decode")
            reply = await mesh.stub("prefill", "router").Prefill(request, timeout=10.0)
            transfers = await asyncio.wait_for(asyncio.gather(*waiting), 60.0)
            return reply, transfers, census.hops
    reply, (main, relay), hops = run_virtual(body())
    assert not [hop for hop in hops if hop[2] == "Announce"]
    assert (main.num_tokens, main.emulated_bytes) == (19999 - 4096, reply.kv_bytes_emulated)
    assert (relay.num_tokens, relay.emulated_bytes) == (19999, reply.kv_bytes_emulated_secondary)
    assert main.first_token == relay.first_token == reply.first_token and main.completed_in_band
    assert main.announced_at == relay.announced_at  # both timed from prefill's end