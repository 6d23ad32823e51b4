"""Schedules: YAML and CSV parsing, validation, the shipped examples, and playing them."""

import asyncio

import pytest

from netem.config import ConfigError, LinkConfig
from netem.link import UserspaceLink
from netem.schedule import load_schedule, parse_posted, parse_schedule, posted_form, trace_steps
from netem.schedules import example
from tests.netem.servers import WAIT_S, Recorder

KV_BITS = 256 * 2**20 * 8


def test_yaml_timeline_parses_units_and_sorts_steps():
    s = parse_schedule("""
loop: true
period: 10s
steps:
  - at: 5s
    up: {rate: 100mbit}
  - at: 0
    both: {delay: 20ms}
  - at: 2500ms
    partition: {mode: blackhole, direction: down, duration: 1s}
  - at: 3s
    heal: down
  - at: 4s
    reset: true
""")
    assert [step.at for step in s.steps] == [0.0, 2.5, 3.0, 4.0, 5.0]
    assert s.steps[1].partition.duration == 1.0
    assert s.steps[4].patch == {"up": {"rate": "100mbit"}}
    assert s.period == 10.0


@pytest.mark.parametrize(
    "text, message",
    [
        ("steps: [{at: 0, up: {delay: 5parsecs}}]", "duration unit"),
        ("steps: [{at: 0, up: {colour: red}}]", "unknown field"),
        ("steps: [{at: 0, sideways: {delay: 1ms}}]", "sideways"),
        ("loop: true\nsteps: [{at: 5, up: {delay: 1ms}}]", "period"),
        ("steps: []", "at least one step"),
        ("steps: [{at: 0, partition: {mode: drop}}]", "blackhole"),
        ("- just a list", "mapping"),
        ("steps: [{at: 0, up: {delay: 1ms}}\n", "YAML"),
    ],
)
def test_bad_schedules_are_refused_with_a_reason(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_schedule(text)


def test_csv_trace_rows_become_steps():
    steps = trace_steps("# a comment\nt,delay,rate\n0,10ms,1gbit\n1.5,20ms,\n3s,,500mbit\n", "up")
    assert steps == [
        {"at": "0", "up": {"delay": "10ms", "rate": "1gbit"}},
        {"at": "1.5", "up": {"delay": "20ms"}},
        {"at": "3s", "up": {"rate": "500mbit"}},
    ]
    with pytest.raises(ConfigError, match="header"):
        trace_steps("time,rate\n0,1gbit\n")
    with pytest.raises(ConfigError, match="line 3"):
        trace_steps("t,rate\n0,1gbit\n1\n")


def test_trace_file_is_found_next_to_the_yaml(tmp_path):
    (tmp_path / "d.csv").write_text("t,delay\n0,5ms\n2,50ms\n")
    (tmp_path / "s.yaml").write_text("trace: {file: d.csv, direction: down}\n")
    s = load_schedule(tmp_path / "s.yaml")
    assert [(st.at, st.down) for st in s.steps] == [(0.0, {"delay": "5ms"}), (2.0, {"delay": "50ms"})]


@pytest.mark.parametrize("name", ["kv_wander.yaml", "kv_wander_trace.yaml"])
def test_shipped_kv_wander_makes_a_256mib_transfer_take_1_to_20_s(name):
    schedule = load_schedule(example(name))
    config = LinkConfig()
    times = []
    for step in schedule.steps:
        config = config.patched(step.patch)
        if config.up.rate_bps is not None:  # the trace variant sets the delay in a step of its own
            times.append(config.up.delay_s + KV_BITS / config.up.rate_bps)
    assert len(times) == 15
    assert min(times) == pytest.approx(1.0, rel=0.01)
    assert max(times) == pytest.approx(20.0, rel=0.01)
    assert all(0.99 <= t <= 20.2 for t in times)
    assert schedule.loop and schedule.period == 60.0


async def test_a_playing_schedule_changes_the_link_and_can_be_stopped():
    schedule = parse_schedule("""
loop: true
period: 0.2s
steps:
  - at: 0
    up: {delay: 1ms}
  - at: 0.1s
    up: {delay: 7ms}
""")
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address) as link:
        runner = await link.run_schedule(schedule)
        seen = []

        async def watch() -> None:
            while runner.applied < 5:
                await runner.stepped.wait()
                runner.stepped.clear()
                seen.append(link.config.up.delay_s)

        await asyncio.wait_for(watch(), WAIT_S)
        assert set(seen) == {0.001, 0.007}
        assert runner.cycle >= 2
        assert runner.status()["running"]
        assert await link.stop_schedule()
        assert not runner.running
        assert link.schedule is None


async def test_schedule_steps_partition_and_reset():
    schedule = parse_schedule("""
steps:
  - at: 0
    partition: {mode: blackhole, direction: up}
  - at: 0.05s
    heal: up
    reset: true
""")
    async with Recorder() as up, UserspaceLink(("127.0.0.1", 0), up.address) as link:
        runner = await link.run_schedule(schedule)
        await asyncio.wait_for(runner.join(), WAIT_S)
        assert runner.applied == 2
        assert link.stats()["up"]["partition"] is None


def test_a_bare_csv_is_a_schedule_too(tmp_path):
    (tmp_path / "rate.csv").write_text("t,rate\n0,1gbit\n5,100mbit\n")
    s = load_schedule(tmp_path / "rate.csv")
    assert [(st.at, st.both) for st in s.steps] == [(0.0, {"rate": "1gbit"}), (5.0, {"rate": "100mbit"})]
    assert not s.loop


@pytest.mark.parametrize("name", ["kv_wander_trace.yaml", "kv_wander_rate.csv", "kv_wander.yaml"])
def test_a_schedule_file_posts_as_content_with_its_trace_inlined(name):
    # The control API reads no files, so the client sends the trace's rows along.
    posted = parse_posted(posted_form(example(name)))
    assert posted == load_schedule(example(name))
