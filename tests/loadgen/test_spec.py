from pathlib import Path

import pytest

from loadgen.hitbins import DEFAULT_HIT_WEIGHTS
from loadgen.lengths import LengthDist, parse_tokens
from loadgen.spec import SpecError, parse_spec
from loadgen.workloads import AgenticConfig, MooncakeConfig, SyntheticConfig

SAMPLE = Path(__file__).resolve().parents[2] / "loadgen" / "samples" / "mooncake-sample.jsonl"


def test_agentic_with_units_and_defaults():
    config = parse_spec("agentic:context=16K,output=50..400,think=250ms,turns=5,cache-outputs=false")
    assert isinstance(config, AgenticConfig)
    assert config.context == 16384
    assert (config.output.kind, config.output.low, config.output.high) == ("uniform", 50, 400)
    assert config.think == 0.25
    assert config.turns.low == 5
    assert config.cache_outputs is False
    assert config.hits == pytest.approx(DEFAULT_HIT_WEIGHTS)
    assert config.initial_length.low == 4096


def test_bare_agentic_and_hit_weights():
    assert parse_spec("agentic") == AgenticConfig()
    natural = parse_spec("agentic:hits=natural")
    assert natural.hits is None
    custom = parse_spec("agentic:hits=1/1/1/1/1/1/2")
    assert custom.hits[-1] == pytest.approx(0.25)


def test_mooncake_file_and_options():
    config = parse_spec(f"mooncake:{SAMPLE}:speed=4,limit=10,max_output=64")
    assert isinstance(config, MooncakeConfig)
    assert config.file == SAMPLE
    assert (config.speed, config.limit, config.max_output) == (4.0, 10, 64)
    assert parse_spec(f"mooncake:{SAMPLE}").speed == 1.0


def test_poisson_and_gamma():
    poisson = parse_spec("poisson:input=2K,output=exp100,rate=3")
    assert isinstance(poisson, SyntheticConfig) and poisson.kind == "poisson"
    assert poisson.input.low == 2048 and poisson.output.kind == "exp" and poisson.rate == 3.0
    gamma = parse_spec("gamma:cv=2.5")
    assert gamma.kind == "gamma" and gamma.cv == 2.5


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("llama:rate=1", "unknown workload 'llama'"),
        ("agentic:contxt=4K", "unknown key 'contxt'; valid keys: cache_outputs, context"),
        ("agentic:context=lots", "context: cannot read token count 'lots'"),
        ("agentic:output=400..50", "output: length range 400..50"),
        ("agentic:hits=1/2/3", "need 7 bin weights"),
        ("agentic:think", "'think' is not key=value"),
        ("agentic:turns=3,turns=4", "key 'turns' given twice"),
        ("mooncake:", "needs a trace file"),
        ("poisson:cv=0", "cv: Input should be greater than 0"),
        ("poisson:output=exp", "cannot read length 'exp'"),
    ],
)
def test_errors_name_the_problem(spec, message):
    with pytest.raises(SpecError, match=None) as error:
        parse_spec(spec)
    assert message in str(error.value)


def test_length_distributions_draw_inside_their_range():
    import random

    rng = random.Random(3)
    uniform = LengthDist.model_validate("10..20")
    assert {uniform.draw(rng) for _ in range(500)} == set(range(10, 21))
    exp = LengthDist.model_validate("exp100")
    draws = [exp.draw(rng) for _ in range(2000)]
    assert min(draws) >= 1 and max(draws) <= 800
    assert 80 < sum(draws) / len(draws) < 120
    assert LengthDist.model_validate(7).draw(rng) == 7
    assert parse_tokens("64K") == 65536 and parse_tokens(100) == 100


@pytest.mark.parametrize("spec", [
    "agentic", "agentic:context=16K,output=50..400,think=250ms,hits=natural",
    "agentic:hits=1/1/1/1/1/1/1,cache_outputs=false,initial=exp2K,sessions=3",
    f"mooncake:{SAMPLE}:speed=4,limit=9", "gamma:cv=2,input=exp300", "poisson:rate=2.5,shared_prefix=1K",
])
def test_spec_string_parses_back_to_the_same_config(spec):
    from loadgen.spec import spec_string

    config = parse_spec(spec)
    assert parse_spec(spec_string(config)) == config
