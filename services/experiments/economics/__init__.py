"""`experiment economics`: does PDD pay at the report's own scale (docs/economics.md).

- loadpoint.py: the "run one load point" interface every backend implements, and its result;
- meshpoint.py: the backend that runs a load point in the real-time mesh (mini scale);
- search.py: max goodput near the knee, per deployment, over seeds;
- figures.py: cost, BCR and the headline figures;
- arms.py: the deployments and iso-cost arms, derived from the `paper-full-*` presets by overrides;
- validity.py: the checks reported at every knee;
- sensitivity.py: every assumed parameter as a named override set, and the tornado;
- cases.py: the sensitivity cases as runs, and each case's figures, knees and checks;
- charts.py: goodput curves, TTFT CDFs, the tornado and the arms' BCR bars;
- experiment.py: the whole method, on whichever backend is available.
"""
