"""Experiments that reproduce the PDD report's measurements from the emulator's mechanisms (docs/results.md).

| module | job |
| --- | --- |
| `reported.py` | the report's setup (scaled) and results (only ever compared with) |
| `scaling.py`, `dilation.py` | the report's setup on this machine: WAN sizing, prices, time dilation |
| `rates.py`, `steady.py`, `meshrun.py` | a mesh climbing a staircase of offered rates, measured in windows |
| `goodput.py`, `comparison.py` | max goodput from a sweep; paper / emulated / ratio tables |
| `paper.py`, `paper_report.py` | `experiment paper`: intra-DC PD, cross-DC PD and PDD |
| `bathtub.py`, `bathtub_report.py` | `experiment bathtub`: the engine's planner in emulated time |
| `handoff.py`, `wan.py`, `micro_reports.py` | `experiment handoff` and `experiment wan` |
| `economics/` | `experiment economics`: max goodput near the knee, BCR, iso-cost arms, validity checks, sensitivity |
| `plots.py`, `runner.py` | figures; running one experiment and writing its report |
"""
