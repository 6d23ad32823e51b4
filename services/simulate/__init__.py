"""The simulation's substrate: a virtual clock for the role code (docs/simulate.md)."""
