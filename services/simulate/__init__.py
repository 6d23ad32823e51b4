"""The mesh's role code in one process on virtual time: `pdd-emu simulate` (docs/simulate.md).

- `clock`: an asyncio loop on virtual time, the `Clock` role code stamps times with, and
  `process_clocks` that points the time module at it for a run;
- `inproc`: gRPC stubs whose calls go straight into the servicer objects;
- `kvlink`: the KV data plane's frames counted and timed on a virtual link;
- `wiring`: every service of a plan, joined by those two;
- `client`: one bench request through the router's own checks and encoder;
- `run`: `simulate_run` / `run_simulation`, the bench's workload driven against the wiring;
- `agreement`: the same workload and seed on a real mesh, compared request by request;
- `kv_case`: the article's KV-transfer workload as message sizes, for the virtual link;
- `realtime`: whether a scenario is small enough to run as a real-time mesh on this machine.
"""
