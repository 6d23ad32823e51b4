"""The bathtub: dips where the tail chunk is small, only when tails run alone."""

from __future__ import annotations

import pytest

from services.experiments.bathtub import PrefillSetup, bathtub, dip_depths, predicted_dips, tail_tokens, with_policy
from tests.experiments.cli import quick_headline

SETUP = PrefillSetup(requests=8)


def test_the_tail_is_what_the_last_chunk_leaves():
    assert tail_tokens(SETUP, 0.87) == round(65536 * 0.13) - 8192  # one full chunk, then the rest
    assert tail_tokens(SETUP, 0.875) == 8192  # exactly one chunk: no tail
    assert 0.87 in predicted_dips(SETUP, [0.86, 0.87, 0.88])


def test_a_small_isolated_tail_is_a_dip_and_a_mixed_one_is_not():
    grid = [0.86, 0.87, 0.88]
    isolated = dip_depths(bathtub(SETUP, grid), [0.87])[0.87]
    mixed = dip_depths(bathtub(with_policy(SETUP, False), grid), [0.87])[0.87]
    assert isolated > 0.05 > mixed


@pytest.mark.slow
def test_quick_bathtub_shows_its_dips(tmp_path):
    headline = quick_headline("bathtub", tmp_path)
    assert len(headline["dips"]) >= 3 and 0.87 in headline["dips"]
    assert headline["dips_without_isolation"] == []
