"""One function turns a planned link's emulated spec into its real netem config (docs/mesh.md §Byte scale)."""

from __future__ import annotations

from netem.config import LinkConfig
from services.launcher.processes import link_command
from services.scenario import LinkSpec
from services.scenario.link_config import MIN_QUEUE_BYTES, real_fields, real_link_config
from services.scenario.plan import LinkPlan


def _link(purpose: str = "kv", **spec: object) -> LinkPlan:
    return LinkPlan(name="wan", src="p", dst="d", kind="wan", host="127.0.0.1", listen_port=1, control_port=2,
                    upstream_port=3, purpose=purpose, spec=LinkSpec(**spec))


def test_a_kv_link_divides_rate_and_queue_by_byte_scale():
    # real rate = 10 Gbit/s / 1000; real queue = 64 MiB / 1000 = 67108 bytes, above the 64 KiB floor
    config = real_link_config(_link(rate_bps="10gbit", delay_s="20ms", queue_bytes="64MiB", loss="0.1%"), 1000.0)
    for side in (config.up, config.down):
        assert side.rate_bps == 10e9 / 1000 and side.queue_bytes == 67108
        assert side.delay_s == 0.020 and side.loss == 0.001  # time and loss do not scale


def test_a_kv_link_divides_its_window_too_so_a_connection_keeps_its_rate():
    # 3 MiB per 20 ms round trip is 1.26 Gbit/s a connection; divided by 1000 with the rate, it stays that
    config = real_link_config(_link(rate_bps="20gbit", delay_s="10ms", window_bytes="3MiB"), 1000.0)
    assert config.up.window_bytes == 3 * 2**20 // 1000 and config.rtt("up") == 0.020
    assert real_link_config(_link(rate_bps="20gbit"), 1000.0).up.window_bytes is None


def test_a_scaled_queue_stops_at_the_floor():
    # 64 MiB / 2000 = 33554 bytes, below the floor: the queue is the floor
    config = real_link_config(_link(rate_bps="10gbit", queue_bytes="64MiB"), 2000.0)
    assert config.up.queue_bytes == MIN_QUEUE_BYTES == 65536 and config.up.rate_bps == 5e6


def test_a_control_link_keeps_its_emulated_rate_and_queue():
    config = real_link_config(_link("control", rate_bps="10gbit", queue_bytes="64MiB"), 1000.0)
    assert config.up.rate_bps == 10e9 and config.up.queue_bytes == 64 * 2**20


def test_a_patch_in_emulated_units_scales_like_the_spec():
    patch = real_fields(_link(rate_bps="10gbit"), {"rate": "5gbit", "queue": "128MiB", "delay": "50ms"}, 1000.0)
    assert patch == {"rate": 5e6, "queue": int(128 * 2**20 / 1000), "delay": "50ms"}
    assert real_fields(_link(rate_bps="10gbit"), {"rate": "unlimited"}, 1000.0) == {"rate": None}
    assert real_fields(_link(rate_bps="10gbit"), {"window": "3MiB"}, 1000.0) == {"window": 3 * 2**20 // 1000}
    assert real_fields(_link(rate_bps="10gbit"), {"window": "unlimited"}, 1000.0) == {"window": None}


def test_the_launcher_hands_the_link_its_config_to_the_bit(tmp_path):
    # 10 Gbit/s / 3 is not a whole number of bit/s: a rate formatted onto the command line would lose it
    link = _link(rate_bps="10gbit", delay_s="5ms")
    cmd = link_command(link, 3.0, 7, tmp_path)
    written = LinkConfig.model_validate_json((tmp_path / "links" / "wan.json").read_text())
    assert cmd[cmd.index("--config") + 1] == str((tmp_path / "links" / "wan.json").resolve())
    assert written == real_link_config(link, 3.0) and written.up.rate_bps == 10e9 / 3
    assert "--rate" not in cmd and "--queue" not in cmd
