"""Bad scenarios and overrides: a ScenarioError that says what is wrong, never a traceback."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from services.scenario import ScenarioError, load_scenario

FIELDS = ["name", "mode", "model", "seed", "byte_scale", "pools", "wan", "rdma", "engine", "pdd", "sla",
          "max_inflight", "request_timeout_s", "transfer_timeout_s", "wan.rate_bps", "wan.delay_s",
          "wan.schedule", "engine.block_size", "pdd.relay_cap", "pools.prefill.count", "pools.decode.gpu",
          "pools.decode.role", "pools.nosuch.tp"]
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
yaml_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=10), inner, max_size=3), max_leaves=8)


def _loads_or_refuses(name: str, overrides: list[str]) -> None:
    try:
        load_scenario(name, overrides)
    except ScenarioError as exc:
        assert str(exc)


@settings(max_examples=300, deadline=None)
@given(overrides=st.lists(st.builds(lambda k, v: f"{k}={v}", st.sampled_from(FIELDS) | st.text(max_size=12),
                                    st.text(max_size=24)), max_size=3))
def test_arbitrary_override_text(overrides):
    _loads_or_refuses("pd-cross-mini", overrides)


@settings(max_examples=200, deadline=None)
@given(key=st.sampled_from(FIELDS), value=yaml_values)
def test_arbitrary_override_values(key, value):
    _loads_or_refuses("pdd-mini", [f"{key}={yaml.safe_dump(value, default_flow_style=True).strip()}"])


@settings(max_examples=200, deadline=None)
@given(data=st.dictionaries(st.sampled_from(FIELDS[:14]), yaml_values, max_size=6))
def test_arbitrary_scenario_mappings(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    _loads_or_refuses(str(path), [])


@pytest.mark.parametrize("value", ["[", "{a: 1", "!!python/object:os.system", "\x00", "a: b: c"])
def test_an_override_that_is_not_yaml_names_itself(value):
    with pytest.raises(ScenarioError, match="not a YAML scalar"):
        load_scenario("pd-cross-mini", [f"seed={value}"])
