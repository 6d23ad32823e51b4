"""The live page of a running mesh, served by the router at /dashboard (docs/dashboard.md).

window.py turns the router's own counters into rates, shares and percentiles;
links.py and processes.py read the links' control APIs and the keepers' status
files; sampler.py keeps a bounded history of both, sampled once a second while
someone watches; routes.py serves the page, its assets (static/) and the data.
"""
