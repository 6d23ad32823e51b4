import pytest
from hypothesis import given, settings, strategies as st

from services.scenario import ScenarioError, load_scenario, preset_names
from services.types import Mode


def test_every_preset_loads_and_the_mini_ones_share_model_and_seed():
    scenarios = [load_scenario(name) for name in preset_names()]
    mini = [s for s in scenarios if s.name.endswith("-mini")]
    assert {s.name for s in mini} == {"colocated-mini", "pd-intra-mini", "pd-cross-mini", "pdd-mini",
                                      "pdd-kvship-mini"}
    assert {s.model for s in mini} == {"llama3-8b"}
    assert {s.seed for s in mini} == {7}


def test_pdd_mini_wan_makes_fresh_prompts_slow_and_follow_ups_fast():
    from services.profiles import load_model

    s = load_scenario("pdd-mini")
    kv = load_model(s.model).kv_bytes_per_token
    assert load_model(s.model).max_context >= 32768
    fresh_s = s.wan.delay_s + 30000 * kv * 8 / s.wan.rate_bps
    follow_up_s = s.wan.delay_s + 300 * kv * 8 / s.wan.rate_bps
    assert fresh_s > 2.0 and follow_up_s < 0.1


def test_overrides_reach_nested_fields_and_pools_by_name():
    s = load_scenario("pd-cross-mini", ["wan.rate_bps=5gbit", "pools.decode.count=3", "seed=11"])
    assert s.wan.rate_bps == 5e9 and s.seed == 11
    assert {p.name: p.count for p in s.pools}["decode"] == 3


@pytest.mark.parametrize("override, message", [
    ("wan.rate_bps=fast", "rate"),
    ("pools.nosuch.count=2", "no pool named"),
    ("seed", "key=value"),
    ("pools.decode.gpu=b300", "unknown GPU"),
    ("model=gpt-9", "unknown model"),
    ("mode=pd-intra", "same datacenter"),
    ("engine.block_size=0", "block_size"),
])
def test_bad_overrides_name_the_problem(override, message):
    with pytest.raises(ScenarioError, match=message):
        load_scenario("pd-cross-mini", [override])


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ScenarioError, match="pd-cross-mini"):
        load_scenario("no-such-scenario")


def test_file_scenario(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: x\nmode: colocated\nmodel: llama3-8b\npools:\n"
                    "  - {name: c, role: colocated, dc: a, gpu: l40s}\n")
    assert load_scenario(str(path)).mode is Mode.COLOCATED
    path.write_text("- just\n- a list\n")
    with pytest.raises(ScenarioError, match="mapping"):
        load_scenario(str(path))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_yaml_gives_scenario_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "s.yaml"
    path.write_text(text)
    try:
        load_scenario(str(path))
    except ScenarioError:
        pass
