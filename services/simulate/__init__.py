"""The simulation's substrate (docs/simulate.md).

- `clock`: an asyncio loop on virtual time, and the `Clock` role code stamps times with;
- `kv_case`: the article's KV-transfer workload as message sizes, for the virtual link;
- `realtime`: whether a scenario is small enough to run as a real-time mesh on this machine.
"""
