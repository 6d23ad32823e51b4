import random
import statistics

import pytest
from scipy import stats

from netem.stages.jitter import TABLE_MAX, JitterSource, StandardCdf, quantile

DISTS = ("uniform", "normal", "pareto", "paretonormal")


@pytest.mark.parametrize("dist", DISTS)
def test_draws_follow_the_distribution(dist):
    src = JitterSource(random.Random(42))
    sigma = 0.005
    src.configure(dist, sigma, 0.0)
    draws = [src.sample() / sigma for _ in range(4000)]
    result = stats.kstest(draws, StandardCdf(dist))
    assert result.pvalue > 0.01, result


@pytest.mark.parametrize("dist", DISTS)
def test_a_wrong_distribution_is_rejected(dist):
    # The KS check above has teeth: draws from a different shape fail it.
    other = "normal" if dist != "normal" else "uniform"
    src = JitterSource(random.Random(3))
    src.configure(other, 1.0, 0.0)
    draws = [src.sample() for _ in range(4000)]
    assert stats.kstest(draws, StandardCdf(dist)).pvalue < 0.01


def test_known_quantiles():
    assert quantile("uniform", 0.75) == pytest.approx(0.5)
    assert quantile("normal", 0.975) == pytest.approx(1.95996, rel=1e-4)
    assert quantile("pareto", 0.0) == pytest.approx(-2.0 / 3.0)
    assert quantile("pareto", 0.999999) == pytest.approx(TABLE_MAX)  # netem's tables stop at +4 sigma
    assert quantile("paretonormal", 0.5) == pytest.approx(0.25 * 0 + 0.75 * (4 / 3) * (2 ** (1 / 3) - 1.5))


def test_pareto_and_normal_have_mean_near_zero():
    for dist in ("normal", "pareto"):
        src = JitterSource(random.Random(5))
        src.configure(dist, 1.0, 0.0)
        assert abs(statistics.fmean(src.sample() for _ in range(20000))) < 0.05


def test_correlation_makes_neighbours_alike():
    def lag1(rho: float) -> float:
        src = JitterSource(random.Random(9))
        src.configure("uniform", 1.0, rho)
        xs = [src.sample() for _ in range(5000)]
        return statistics.correlation(xs[:-1], xs[1:])

    assert abs(lag1(0.0)) < 0.05
    assert lag1(0.75) > 0.6


def test_zero_sigma_draws_nothing():
    src = JitterSource(random.Random(1))
    src.configure("normal", 0.0, 0.5)
    assert {src.sample() for _ in range(10)} == {0.0}
