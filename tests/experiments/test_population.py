"""Staircases of agents: start times and measured windows."""

from __future__ import annotations

import pytest

from services.experiments.population import Step, staircase


def test_agents_start_evenly_over_each_ramp_and_windows_follow_settling():
    population = staircase([Step(4, 20, 10, 30), Step(6, 10, 5, 30)])
    assert population.starts == (0.0, 5.0, 10.0, 15.0, 60.0, 65.0)
    assert [(w.users, w.start_s, w.end_s) for w in population.windows] == [(4, 30, 60), (6, 75, 105)]
    assert population.end_s == 105


def test_populations_only_grow():
    with pytest.raises(ValueError):
        staircase([Step(4, 1, 1, 1), Step(2, 1, 1, 1)])
    with pytest.raises(ValueError):
        Step(0, 1, 1, 1)
