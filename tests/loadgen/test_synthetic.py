import random
import statistics

import pytest

from loadgen.arrivals import arrival_offsets
from loadgen.spec import parse_spec
from loadgen.workloads import SyntheticWorkload
from tests.tolerance import assert_close


def gaps(rate: float, shape: str, cv: float, n: int = 20000) -> list[float]:
    offsets = arrival_offsets(rate, random.Random(11), shape, cv)
    times = [next(offsets) for _ in range(n)]
    return [b - a for a, b in zip([0.0] + times, times)]


def test_poisson_gaps_have_mean_one_over_rate_and_cv_one():
    values = gaps(4.0, "poisson", 1.0)
    assert_close(statistics.fmean(values), 0.25, rel=0.03, what="mean gap")
    assert_close(statistics.pstdev(values) / statistics.fmean(values), 1.0, rel=0.05, what="cv")


def test_gamma_gaps_keep_the_mean_and_set_the_burstiness():
    values = gaps(2.0, "gamma", 3.0)
    assert_close(statistics.fmean(values), 0.5, rel=0.08, what="mean gap")
    assert_close(statistics.pstdev(values) / statistics.fmean(values), 3.0, rel=0.1, what="cv")


def test_bad_arrival_settings_are_refused():
    with pytest.raises(ValueError):
        next(arrival_offsets(0, random.Random(0)))
    with pytest.raises(ValueError, match="unknown arrival shape"):
        next(arrival_offsets(1, random.Random(0), "uniform"))


def test_synthetic_lengths_prefix_and_limit():
    spec = parse_spec("poisson:input=100..200,output=7,shared_prefix=50,requests=30")
    source = SyntheticWorkload(spec, random.Random(2))
    plans = []
    while (session := source.new_session()) is not None:
        plans.append(session.first_request())
    assert len(plans) == 30
    assert all(100 <= p.prompt_tokens <= 200 and p.max_tokens == 7 for p in plans)
    assert all(p.prompt[:50] == plans[0].prompt[:50] for p in plans)
    assert plans[1].prompt[50:60] != plans[0].prompt[50:60]
    assert plans[0].hit_rate == 0.0
    assert plans[5].hit_rate == pytest.approx(50 / plans[5].prompt_tokens)
    assert (source.arrival_shape, source.arrival_cv) == ("poisson", 1.0)
    gamma = SyntheticWorkload(parse_spec("gamma:cv=2,rate=3"), random.Random(0))
    assert (gamma.arrival_shape, gamma.arrival_cv, gamma.default_rate) == ("gamma", 2.0, 3.0)
