"""The real-time check: full-scale presets are refused by `up`, the mini ones pass."""

from __future__ import annotations

import pytest

from services.cli import main
from services.scenario import load_scenario
from services.simulate.realtime import CPU_SECONDS_PER_TOKEN, realtime_fit


def test_mini_presets_fit_two_cores_and_full_scale_ones_do_not():
    assert realtime_fit(load_scenario("pdd-mini"), cores=2).fits
    full = realtime_fit(load_scenario("paper-full-pdd"), cores=2)
    assert full.refused
    assert full.needed_cores == pytest.approx(full.tokens_per_s * CPU_SECONDS_PER_TOKEN)


def test_time_dilation_brings_a_deployment_within_the_budget():
    plain = realtime_fit(load_scenario("paper-full-pdd"), cores=2)
    k = int(plain.needed_cores / 2) + 1
    slowed = realtime_fit(load_scenario("paper-full-pdd", [f"time_dilation={k}"]), cores=2)
    assert slowed.fits and slowed.tokens_per_s == plain.tokens_per_s


def test_up_refuses_a_full_scale_preset_before_starting_anything(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("services.simulate.realtime.os.sched_getaffinity", lambda pid: {0, 1})  # this machine's 2
    with pytest.raises(SystemExit) as exit_info:
        main(["up", "--scenario", "paper-full-pdd", "--run-dir", str(tmp_path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "paper-full-pdd" in err and "cores" in err and "time_dilation=" in err
    assert not any(tmp_path.iterdir())  # nothing was planned, launched or recorded


def test_a_deployment_just_over_the_budget_is_warned_about_not_refused():
    # a little over, not twice: paper-pdd at full decode capacity needs about 2.1 cores
    fit = realtime_fit(load_scenario("paper-pdd"), cores=2)
    assert not fit.fits and not fit.refused
