"""The economics deployments and its iso-cost arms, as overrides of the `paper-full-*` presets.

The three deployments are the presets as docs/simulate.md derives them. The
arms separate heterogeneous decode from the relay: the PDD arms change only
main decode's layout on the same 32 GPU-B (so they cost the same), and
cross-DC PD with PDD's B side differs from PDD only by the relay.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.scenario import Scenario, load_scenario

DEPLOYMENTS = {"pd-intra": "paper-full-pd-intra", "pd-cross": "paper-full-pd-cross", "pdd": "paper-full-pdd"}
MINI = {"pd-intra": "pd-intra-mini", "pd-cross": "pd-cross-mini", "pdd": "pdd-mini"}


@dataclass(frozen=True)
class Arm:
    key: str
    title: str
    preset: str
    overrides: tuple[str, ...] = ()

    def scenario(self, extra: tuple[str, ...] = ()) -> Scenario:
        return load_scenario(self.preset, (*self.overrides, *extra))


def _main_decode(**fields: int) -> tuple[str, ...]:
    return tuple(f"pools.main-decode.{name}={value}" for name, value in fields.items())


ARMS = (
    Arm("baseline", "intra-DC baseline (H100 only)", DEPLOYMENTS["pd-intra"]),
    # TP8 with DP attention leaves no room for KV on H200 (the latent's copies); DeepEP keeps the experts whole
    Arm("pdd-b-tp8", "PDD, main decode 4 x H200 TP8 (EP8, no DP attention)", DEPLOYMENTS["pdd"],
        _main_decode(tp=8, dp_attention=1, ep=8, count=4)),
    Arm("pdd-b-tp16-dp", "PDD, main decode 2 x H200 TP16 with DP attention", DEPLOYMENTS["pdd"]),
    Arm("pd-cross-b", "cross-DC PD with PDD's B side (no relay)", DEPLOYMENTS["pd-cross"]),
)


def arm(key: str) -> Arm:
    for candidate in ARMS:
        if candidate.key == key:
            return candidate
    raise KeyError(f"unknown arm {key!r}; choose one of {', '.join(a.key for a in ARMS)}")
