"""The decode role (main decode in PDD, D in the PD baselines, the colocated pool)."""
