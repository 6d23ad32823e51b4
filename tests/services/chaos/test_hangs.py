"""The hang scenario's catalogue and its judgement, without a mesh (tests/chaos runs it on one)."""

from __future__ import annotations

from services.chaos.hangs import KEEPER_BOUND_S, Hang, hang_targets, hangs_check
from services.chaos.mesh import ChaosMesh
from services.chaos.report import PhaseReport
from services.chaos.scenarios import PRESETS, SCENARIOS


def _phase(name: str, ttft_p99: float | None, hung_kills: int = 1, probes=((8.0, "completed", 0.9),)) -> PhaseReport:
    return PhaseReport(name, 10.0, 20.0, {}, ttft_p99, 1.0, {"process": name[5:], "hung_kills": hung_kills,
                                                            "probe_baseline_s": 0.2, "probes": list(probes)})


def test_every_role_and_kv_link_of_each_mode_is_hung_in_turn(tmp_path):
    for mode, preset in PRESETS.items():
        mesh = ChaosMesh(preset, [], tmp_path)
        run = type("Run", (), {"mesh": mesh})()
        processes = [Hang(t).process(run) for t in hang_targets(mode)]
        roles = {s.name for s in mesh.services() if s.role.value != "router"}
        links = {link.name for link in mesh.plan.links if link.purpose == "kv"}
        assert set(processes) == roles | links and len(processes) == len(set(processes))
    phases = SCENARIOS["hang"].phases(True, "pdd", None)
    assert [p.name for p in phases] == ["hang-prefill", "hang-relay-decode", "hang-main-decode", "hang-wan-link",
                                        "hang-rdma-link"]
    assert SCENARIOS["hang"].ci_modes == ("pdd",)


def test_a_hang_passes_within_the_sla_plus_the_keepers_bound_and_only_when_the_keeper_killed_it():
    assert KEEPER_BOUND_S == 7.0
    assert hangs_check([_phase("hang-prefill", 11.9), _phase("hang-wan-link", None)], 5.0) == []
    slow = hangs_check([_phase("hang-main-decode", 12.1)], 5.0)
    assert len(slow) == 1 and "hang-main-decode" in slow[0] and "12.10 s" in slow[0]
    woke = hangs_check([_phase("hang-prefill", 1.0, hung_kills=0)], 5.0)
    assert len(woke) == 1 and "did not kill prefill" in woke[0]


def test_probes_past_the_keepers_bound_must_be_served_within_a_second_of_their_baseline():
    early_slow = (3.0, "completed", 4.0)  # before the bound: the hang may still hold it
    assert hangs_check([_phase("hang-prefill", 5.0, probes=(early_slow, (7.5, "completed", 1.19)))], 5.0) == []
    slow = hangs_check([_phase("hang-prefill", 5.0, probes=((7.5, "completed", 1.21), (8.5, "completed", 1.3)))],
                       5.0)
    assert len(slow) == 1 and "median 1.255 s" in slow[0]
    one_late = ((7.5, "completed", 1.5), (8.5, "completed", 0.3), (9.5, "completed", 0.2))
    assert hangs_check([_phase("hang-prefill", 5.0, probes=one_late)], 5.0) == []  # the median: 0.3 s
    refused = ((9.0, "failed", 0.01), (10.0, "failed", 0.02))  # pd-cross's only decode pool: a quick 503
    assert hangs_check([_phase("hang-decode", None, probes=refused)], 5.0) == []
    lost = hangs_check([_phase("hang-main-decode", 5.0, probes=((9.0, "lost", None),))], 5.0)
    assert len(lost) == 1 and "was lost" in lost[0]
