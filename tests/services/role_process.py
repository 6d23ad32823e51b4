"""A role process of a preset's plan with its engines running, for the role cores' tests (no sockets)."""

from __future__ import annotations

import contextlib
from typing import AsyncIterator

from services.instances import RoleProcess
from services.launcher.plan import build_plan
from services.scenario import load_scenario


@contextlib.asynccontextmanager
async def running_process(preset: str, service: str) -> AsyncIterator[RoleProcess]:
    plan = build_plan(load_scenario(preset, ()))
    process = RoleProcess(plan, plan.service(service))
    for engine in process.engines:
        await engine.start()
    try:
        yield process
    finally:
        for engine in process.engines:
            await engine.stop()
