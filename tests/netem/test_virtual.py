"""The virtual link on message sizes: the userspace link's model, in virtual time."""

from __future__ import annotations

import asyncio
import random
import statistics
import time

import pytest
from scipy import stats

from netem.config import LinkConfig
from netem.link import UserspaceLink
from netem.schedule import Schedule, load_schedule
from netem.schedules import example
from netem.stages.jitter import StandardCdf
from netem.virtual import VirtualLink
from services.simulate.clock import run_virtual
from tests.tolerance import assert_at_least, assert_at_most, assert_close

MB = 1_000_000
WAIT_S = 3600.0  # virtual seconds: only a hang reaches it


def _virtual(config: LinkConfig, body, seed: int = 1):
    async def main():
        async with VirtualLink(config, seed=seed) as link:
            return await asyncio.wait_for(body(link, asyncio.get_running_loop()), WAIT_S)

    return run_virtual(main())


def test_one_message_takes_propagation_plus_size_over_rate():
    async def body(link, loop):
        await link.send("up", 250 * MB)
        return loop.time()

    took = _virtual(LinkConfig.symmetric(delay="35ms", rate="2gbit"), body)
    assert_close(took, 0.035 + 250 * MB * 8 / 2e9, rel=1e-9, what="delivery of 250 MB")


def test_messages_sent_together_share_the_line_piece_by_piece():
    # Four connections each send a message at once, as four TCP connections through one bottleneck do:
    # the mesh's link reads each ready connection once a loop pass (docs/netem.md, "Sharing the line"),
    # so the line serves them in turn, and each ends when the smaller ones and its own share have
    # crossed (processor sharing). Fed whole, the first would have ended after its own 40 MB.
    sizes = [40 * MB, 5 * MB, 20 * MB, 1 * MB]

    async def body(link, loop):
        async def one(n):
            await link.send("up", n)
            return loop.time()

        return await asyncio.gather(*(one(n) for n in sizes))

    done = _virtual(LinkConfig.symmetric(delay="10ms", rate="800mbit"), body)
    ordered = sorted(sizes)
    piece_s = 2e-3  # a piece is 2 ms of line time; each message's last one may wait a round
    for size, at in zip(sizes, done):
        k = ordered.index(size)
        shared = sum(ordered[:k]) + (len(sizes) - k) * size
        assert_close(at, 0.010 + shared * 8 / 800e6, rel=0.0, abs_=len(sizes) * piece_s, what=f"{size} bytes")
    assert_close(max(done), 0.010 + sum(sizes) * 8 / 800e6, rel=1e-9, what="the last byte of all four")


def test_a_message_started_later_shares_the_line_held_by_the_bound():
    # The first message fills the 64 KiB queue; the second starts 154 ms later. From then on the
    # bound's every release lets each feed one piece, as the real link reads each connection once a
    # pass: through the userspace link on loopback the first ended at 0.66-0.68 s and the second at
    # 0.865 s (docs/simulate.md, "Transfers sharing a line"). Feeding all it could per release, the
    # first message took two pieces to the second's one and ended at 0.54 s.
    async def body(link, loop):
        first, second = link.connect(), link.connect()

        async def one(conn, start):
            await asyncio.sleep(start)
            await conn.send("up", 537_000)
            return loop.time()

        return await asyncio.gather(one(first, 0.0), one(second, 0.154))

    first, second = _virtual(LinkConfig.symmetric(rate="10mbit", delay="5ms", queue=67108), body)
    assert_close(second, 0.005 + 2 * 537_000 * 8 / 10e6, rel=1e-3, what="the second message's end")
    assert_close(first, 0.66, rel=0.02, what="the first message's end, sharing the line from 0.154 s on")


def test_directions_are_separate_lines():
    async def body(link, loop):
        async def one(side):
            await link.send(side, 100 * MB)
            return loop.time()

        return await asyncio.gather(one("up"), one("down"))

    up, down = _virtual(LinkConfig.symmetric(rate="1gbit"), body)
    assert up == down == pytest.approx(0.8)


def test_a_blackhole_holds_delivery_until_it_heals():
    async def body(link, loop):
        transfer = asyncio.ensure_future(link.send("up", 100 * MB))  # 0.8 s at 1 Gbit/s
        await asyncio.sleep(0.3)
        link.partition("blackhole", "up", duration=4.0)
        await transfer
        return loop.time()

    assert_close(_virtual(LinkConfig.symmetric(rate="1gbit", delay="5ms"), body), 4.3, rel=1e-9)


def test_a_blackhole_without_duration_lasts_until_healed():
    async def body(link, loop):
        link.partition("blackhole", "both")
        transfer = asyncio.ensure_future(link.send("down", 1 * MB))
        await asyncio.sleep(100.0)
        assert not transfer.done()
        link.heal("both")
        await transfer
        return loop.time()

    assert _virtual(LinkConfig.symmetric(delay="20ms"), body) == 100.0


def test_a_reject_resets_messages_in_flight_and_refuses_new_ones():
    async def body(link, loop):
        transfer = asyncio.ensure_future(link.send("up", 100 * MB))
        await asyncio.sleep(0.1)
        link.partition("reject", "both", duration=2.0)
        with pytest.raises(ConnectionResetError):
            await transfer
        with pytest.raises(ConnectionResetError):
            await link.send("up", 1)
        await asyncio.sleep(2.0)
        await link.send("up", 1 * MB)  # healed: a fresh connection goes through
        return link.stats()["up"]["resets"]

    assert _virtual(LinkConfig.symmetric(rate="1gbit"), body) >= 2


def test_a_schedule_changes_the_rate_mid_message():
    schedule = Schedule.model_validate(
        {"steps": [{"at": "0s", "both": {"rate": "1gbit", "delay": "10ms"}}, {"at": "1s", "both": {"rate": "100mbit"}}]}
    )

    async def body(link, loop):
        runner = await link.run_schedule(schedule)
        await runner.stepped.wait()  # the first step applies when the runner first runs, as in the mesh
        await link.send("up", 250 * MB)
        return loop.time()

    # 125 MB leave in the first second at 1 Gbit/s, the other 125 MB at 100 Mbit/s. As in the mesh,
    # bytes stamped within one piece plus the horizon (7 ms of line time) keep the old rate, so the
    # message may end up to 7 ms x (1 Gbit/s / 100 Mbit/s) early.
    assert_close(_virtual(LinkConfig(), body), 1.0 + 125 * MB * 8 / 100e6 + 0.010, rel=0.0, abs_=0.070)


def test_the_shipped_wander_schedule_moves_a_256_mib_transfer_between_1_and_20_s():
    schedule = load_schedule(example("kv_wander.yaml"))

    async def body(link, loop):
        runner = await link.run_schedule(schedule)
        await runner.stepped.wait()
        took = []
        for start in (0.0, 16.0):
            await asyncio.sleep(start - loop.time())
            await link.send("up", 256 * 2**20)
            took.append(loop.time() - start)
        return took

    fast, slow = _virtual(LinkConfig(), body)
    assert_close(fast, 1.0 + 0.020, rel=0.05, what="256 MiB at t=0")
    assert_close(slow, _line_seconds(schedule, 16.0, 256 * 2**20) + 0.020, rel=0.0, abs_=0.07, what="at t=16 s")
    assert_at_least(slow, 10.0, "256 MiB at t=16 s, where the walk is slowest")


def _line_seconds(schedule: Schedule, start: float, nbytes: int) -> float:
    """Seconds to serialize nbytes from `start` under a schedule's piecewise-constant rate."""
    steps = [(s.at, s.patch["both"]["rate"]) for s in schedule.steps] + [(schedule.period, None)]
    left, t = nbytes * 8.0, start
    for (at, rate), (until, _) in zip(steps, steps[1:]):
        if until <= t:
            continue
        bps = LinkConfig().patched({"both": {"rate": rate}}).up.rate_bps
        if left <= (until - t) * bps:
            return t + left / bps - start
        left -= (until - t) * bps
        t = until
    raise AssertionError("the transfer outlasts one cycle of the schedule")


def test_jitter_draws_are_the_userspace_links_draws_for_the_same_seed():
    config = LinkConfig.symmetric(delay="50ms", jitter="10ms", jitter_dist="paretonormal", correlation=0.25)
    count = 400

    async def body(link, loop):
        seen = []
        for _ in range(count):
            start = loop.time()
            await link.send("up", 1000)
            seen.append(loop.time() - start - 0.050)
        return seen

    seen = _virtual(config, body, seed=9)
    twin = UserspaceLink(("127.0.0.1", 0), ("127.0.0.1", 1), config, seed=9)  # never started: no sockets
    jitter = twin.direction("up").latency.jitter
    assert seen == pytest.approx([jitter.sample() for _ in range(count)], abs=1e-12)


@pytest.mark.parametrize("dist", ["normal", "pareto"])
def test_jitter_follows_the_configured_distribution(dist):
    config = LinkConfig.symmetric(delay="100ms", jitter="10ms", jitter_dist=dist)

    async def body(link, loop):
        seen = []
        for _ in range(500):
            start = loop.time()
            await link.send("down", 100)
            seen.append((loop.time() - start - 0.100) / 0.010)
        return seen

    assert stats.kstest(_virtual(config, body, seed=11), StandardCdf(dist)).pvalue > 0.001


def test_loss_stalls_add_one_stall_per_lost_unit():
    async def body(link, loop):
        await link.send("up", 10 * MB)
        return loop.time(), link.stats()["up"]["loss_stalls"]

    took, stalls = _virtual(LinkConfig.symmetric(loss="0.05%", loss_stall="200ms"), body, seed=3)
    assert stalls > 0
    assert_close(took, stalls * 0.2, rel=0.0, abs_=0.2 * 3)  # pieces overlap their stalls only a little


def test_the_queue_bound_paces_a_sender_on_a_long_unshaped_path():
    # With no rate, bytes still occupy the queue while they propagate: 64 MiB per 1 s of delay.
    async def body(link, loop):
        await link.send("up", 256 * 2**20)
        return loop.time(), link.stats()["up"]["queue_peak_bytes"]

    took, peak = _virtual(LinkConfig.symmetric(delay="1s", queue="64MiB"), body)
    assert_at_most(peak, 64 * 2**20 + 16 * 2**20, "bytes the link held")
    assert_at_least(took, 3.0, "seconds for four queue-fuls over a 1 s path")


def test_same_seed_same_delivery_times():
    config = LinkConfig.symmetric(delay="20ms", jitter="5ms", jitter_dist="normal", rate="5gbit", loss="0.01%")

    async def body(link, loop):
        rng = random.Random(4)
        out = []

        async def one(delay, size):
            await asyncio.sleep(delay)
            await link.send("up", size)
            out.append(loop.time())

        await asyncio.gather(*(one(rng.uniform(0, 2), rng.randint(1, 50 * MB)) for _ in range(50)))
        return out

    assert _virtual(config, body, seed=2) == _virtual(config, body, seed=2)


def test_bad_message_sizes_are_refused():
    async def body(link, loop):
        with pytest.raises(ValueError, match="bytes"):
            await link.send("up", -1)
        await link.send("up", 0)
        return loop.time()

    assert _virtual(LinkConfig.symmetric(delay="5ms"), body) == 0.0


def test_the_csv_trace_and_the_yaml_walk_deliver_alike():
    async def body(link, loop, name):
        runner = await link.run_schedule(load_schedule(example(name)))
        await runner.stepped.wait()
        took = []
        for start in (1.0, 9.0, 30.0):
            await asyncio.sleep(start - loop.time())
            await link.send("up", 64 * 2**20)
            took.append(loop.time() - start)
        return took

    yaml_walk = _virtual(LinkConfig(), lambda link, loop: body(link, loop, "kv_wander.yaml"))
    csv_walk = _virtual(LinkConfig(), lambda link, loop: body(link, loop, "kv_wander_trace.yaml"))
    # the YAML also sets 2 ms of normal jitter; the trace only the delay
    assert csv_walk == pytest.approx(yaml_walk, abs=0.02)


def test_reconfiguring_keeps_messages_in_flight_and_times_new_ones_anew():
    async def body(link, loop):
        async def timed():
            await link.send("up", 1000)
            return loop.time()

        first = asyncio.ensure_future(timed())
        await asyncio.sleep(0.1)
        link.reconfigure({"both": {"delay": "50ms"}})
        return await asyncio.gather(first, timed())

    first, second = _virtual(LinkConfig.symmetric(delay="1s"), body)
    assert first == pytest.approx(1.0) and second == pytest.approx(0.15)


def test_a_window_caps_one_connection_at_window_per_round_trip():
    async def body(link, loop):
        await link.send("up", 10 * 2**20)
        return loop.time()

    config = LinkConfig.symmetric(delay="50ms", window="1MiB")  # 1 MiB per 100 ms round trip
    assert_close(_virtual(config, body), 9 * 0.100 + 0.050, rel=0.0, abs_=0.100)


def test_a_window_bound_connection_holds_its_own_bytes_not_the_line():
    # 3 MiB a 20 ms round trip is 1.26 Gbit/s for one connection on a 20 Gbit/s line: 72 MB take 0.46 s.
    # Its later rounds wait on its own connection, so 0.3 MB sent meanwhile on another connection crosses
    # in about the delay, and four such transfers at once each keep their own 1.26 Gbit/s.
    async def body(link, loop):
        async def timed(conn, nbytes):
            start = loop.time()
            await conn.send("up", nbytes)
            return loop.time() - start

        big = asyncio.ensure_future(timed(link.connect(), 72 * MB))
        await asyncio.sleep(0.001)
        small = await timed(link.connect(), 300_000)
        parallel = await asyncio.gather(*(timed(link.connect(), 72 * MB) for _ in range(4)))
        return await big, small, parallel, link.stats()["up"]["queue_peak_bytes"]

    config = LinkConfig.symmetric(delay="10ms", rate="20gbit", window="3MiB")
    big, small, parallel, peak = _virtual(config, body)
    one = 72 * MB / (3 * 2**20) * 0.020  # rounds of one window
    assert_close(big, one, rel=0.05, what="72 MB on one window-bound connection")
    assert_at_most(small, 0.010 + 0.002, "0.3 MB beside it")
    for took in parallel:
        assert_close(took, one, rel=0.05, what="72 MB, one of four at once")
    assert_at_most(peak, 4 * 3 * 3 * 2**20, "bytes held on the line (a window-bound flow reads two rounds ahead)")


def test_a_send_cancelled_mid_message_closes_its_connection_and_frees_the_queue():
    async def body(link, loop):
        conn = link.connect()
        with pytest.raises(TimeoutError):  # 1 GB over 1 Gbit/s with a 64 MiB bound: still entering at 1 s
            await asyncio.wait_for(conn.send("up", 1000 * MB), 1.0)
        with pytest.raises(ConnectionResetError):
            await conn.send("up", 1)
        start = loop.time()
        await link.send("up", 1 * MB)  # the line still carries what had entered, then the new message
        return loop.time() - start, link.stats()["up"]["queue_bytes"]

    took, held = _virtual(LinkConfig.symmetric(rate="1gbit"), body)
    assert held == 0
    assert_at_most(took, 1.0, "a new message after the cancelled one")


def test_messages_paused_together_on_one_connection_arrive_whole_in_the_order_sent():
    async def body(link, loop):
        conn = link.connect()

        async def timed(n):
            await conn.send("up", n)
            return loop.time()

        done = await asyncio.gather(timed(100 * MB), timed(50 * MB))
        return done, link.stats()["up"]["queue_peak_bytes"]

    (first, second), peak = _virtual(LinkConfig.symmetric(delay="5ms", rate="1gbit", queue="16MiB"), body)
    assert_close(first, 0.005 + 100 * MB * 8 / 1e9, rel=0.0, abs_=0.01, what="the first message, its stream offset")
    assert_close(second, 0.005 + 150 * MB * 8 / 1e9, rel=0.0, abs_=0.01, what="the second message, behind it")
    assert_at_most(peak, 16 * 2**20 + 2 * 4 * 2**20, "bytes the link held while both were paused")


def test_a_reset_fails_every_message_the_queue_bound_holds_back():
    async def body(link, loop):
        conn = link.connect()
        sends = [asyncio.ensure_future(conn.send("up", 100 * MB)) for _ in range(2)]
        await asyncio.sleep(0.2)
        conn.reset()
        outcomes = await asyncio.gather(*sends, return_exceptions=True)
        await asyncio.sleep(1.0)  # what had entered drains; nothing more enters
        return outcomes, link.stats()["up"]["queue_bytes"], link.stats()["up"]["bytes_in"]

    outcomes, held, entered = _virtual(LinkConfig.symmetric(rate="1gbit", queue="16MiB"), body)
    assert [type(o) for o in outcomes] == [ConnectionResetError, ConnectionResetError]
    assert held == 0
    assert_at_most(entered, 0.2 * 1e9 / 8 + 16 * 2**20 + 8 * 2**20, "bytes that entered before the reset")


def test_idle_connections_cost_no_wake_up_when_the_queue_bound_flips():
    # The bound pauses and resumes every connection of the direction; only one has a message waiting.
    async def body(link, loop):
        idle = [link.connect() for _ in range(20)]
        woken = 0
        later = link.wakeups.later

        def counted(key, callback):
            nonlocal woken
            woken += 1
            later(key, callback)

        link.wakeups.later = counted
        await link.send("up", 64 * 2**20)
        flips = link.stats()["up"]["bytes_in"] // (4 * 2**20)  # one resume per queue-quarter piece
        return woken, flips, [conn.closed for conn in idle]

    woken, flips, closed = _virtual(LinkConfig.symmetric(rate="1gbit", queue="16MiB"), body)
    assert not any(closed)
    assert_at_most(woken, 2 * flips, "wake-ups for one sender's pauses (20 idle connections beside it)")
