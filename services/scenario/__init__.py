"""Scenarios: what a deployment is made of (datacenters, pools, links, model, mode), validated."""

from services.scenario.model import EngineSpec, LinkSpec, PddSpec, PoolSpec, Scenario, SlaSpec
from services.scenario.loader import ScenarioError, load_scenario, preset_names

__all__ = ["EngineSpec", "LinkSpec", "PddSpec", "PoolSpec", "Scenario", "SlaSpec", "ScenarioError", "load_scenario", "preset_names"]
