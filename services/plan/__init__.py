"""`pdd-emu plan`: each architecture's best deployment for the money, optimum against optimum (docs/plan.md).

- spec.py: the plan's question (model, GPUs and lines on offer, workload, SLO, objective), validated;
- workload.py: the workload's requests sampled offline: prompt, missed and output tokens;
- stages.py: one instance's prefill and decode capacities from the roofline and the engines' sizing;
- candidate.py: one deployment, and the scenario it is;
- space.py: the search space per architecture;
- screen.py: the analytic screen: a candidate's goodput and binding stage;
- knees.py: simulated knees and their confidence intervals over seeds;
- planner.py: the method end to end; outputs.py and charts.py: what it writes.
"""
