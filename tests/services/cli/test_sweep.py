"""`pdd-emu sweep`: what --simulate takes and refuses (exit 2) before any Ray starts."""

from __future__ import annotations

import pytest

from tests.services.cli.in_process import cli  # noqa: F401 - the fixture

BASE = ("sweep", "--workload", "poisson:input=3000,output=48", "--duration", "3s")


@pytest.mark.parametrize("extra, message", [
    (("--simulate", "--rates", "1,2"), "needs --scenario"),
    (("--simulate", "--scenario", "pdd-mini", "--url", "http://x", "--rates", "1"), "drop --url"),
    (("--simulate", "--scenario", "no-such-preset", "--rates", "1"), "no-such-preset"),
    (("--simulate", "--scenario", "pdd-mini", "--concurrencies", "4,zero"), "concurrencies"),
    (("--simulate", "--scenario", "pdd-mini", "--concurrencies", "0"), "at least 1"),
    (("--simulate", "--scenario", "pdd-mini", "--rates", "1", "--num-cpus", "2", "--ray-address", "ray://h:1"),
     "--num-cpus"),
    (("--url", "http://x", "--concurrencies", "4"), "--simulate"),
    (("--rates", "1,2"), "--url"),
])
def test_bad_sweeps_exit_2_with_a_reason(cli, tmp_path, extra, message):
    code, _, err = cli(*BASE, "--out", str(tmp_path), *extra)
    assert code == 2 and message in err, err


def test_rates_and_concurrencies_exclude_each_other(cli, tmp_path):
    code, _, err = cli(*BASE, "--out", str(tmp_path), "--simulate", "--scenario", "pdd-mini", "--rates", "1",
                       "--concurrencies", "2")
    assert code == 2 and "not allowed with" in err
