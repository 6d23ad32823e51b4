"""`pdd-emu link --config FILE`: the whole config from a file, as GET /config returns it."""

from __future__ import annotations

import json

import pytest

from netem.config import LinkConfig
from tests.services.cli.in_process import cli  # noqa: F401  (a fixture)


@pytest.mark.parametrize("flag", ["--rate", "--delay"])
def test_a_config_file_and_shaping_flags_are_refused_together(cli, tmp_path, flag):  # noqa: F811
    path = tmp_path / "c.json"
    path.write_text(json.dumps(LinkConfig().model_dump()))
    code, _, err = cli("link", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--config", str(path), flag, "1")
    assert code == 2 and "gives the whole config" in err


def test_a_config_file_with_a_bad_field_names_it(cli, tmp_path):  # noqa: F811
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"up": {"rate": -1}}))
    code, _, err = cli("link", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9", "--config", str(path))
    assert code == 2 and "rate" in err and str(path) in err
