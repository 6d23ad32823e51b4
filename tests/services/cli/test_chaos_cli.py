"""`pdd-emu chaos`: what it refuses before it starts anything."""

import pytest

from tests.services.cli.in_process import cli  # noqa: F401  (a fixture)


@pytest.mark.parametrize("name", ["kill-rld", "rld-overload"])
def test_relay_scenarios_say_pd_cross_has_no_relay(cli, name):  # noqa: F811
    code, out, err = cli("chaos", name, "--mode", "pd-cross", "--quick")
    assert code == 2 and out == ""
    assert f"chaos scenario {name} applies to mode pdd only" in err and "no relay-decode tier" in err


def test_unknown_scenario_lists_the_choices(cli):  # noqa: F811
    code, _, err = cli("chaos", "kill-router")
    assert code == 2 and "wan-partition" in err and "soak" in err


def test_soak_needs_a_readable_duration(cli):  # noqa: F811
    code, _, err = cli("chaos", "soak", "--duration", "soon")
    assert code == 2 and "--duration" in err
