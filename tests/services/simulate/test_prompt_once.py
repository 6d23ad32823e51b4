"""One P-RLD-MD request on the in-process mesh: the prompt crosses each hop once and each process hashes it once."""

from __future__ import annotations

from services.simulate.census import census_of_one_request, prompt_of_length
from services.engine import sequence as sequence_module
from services.router import pipelines
from services.rpc.ids import pack_ids

PROMPT = prompt_of_length(30000)  # fresh: about 3 s over the WAN, so the relay decodes first and hands off
OUTPUT = 700
ROUTER_HOPS = ("prefill", "main-decode", "relay-decode")


def _counting(monkeypatch, module, name: str, counts: dict, key: str, counted=lambda *args: True) -> None:
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        if counted(*args, **kwargs):
            counts[key] = counts.get(key, 0) + 1
        return real(*args, **kwargs)
    monkeypatch.setattr(module, name, wrapper)


def test_each_hop_carries_the_prompt_once_and_each_process_hashes_it_once(monkeypatch):
    counts: dict[str, int] = {}
    _counting(monkeypatch, pipelines, "prompt_fingerprint", counts, "router fingerprints")
    _counting(monkeypatch, sequence_module, "prompt_fingerprint", counts, "engine fingerprints")
    # a sequence given no block hashes hashes its whole context itself: a second hash of the prompt
    _counting(monkeypatch, sequence_module, "extend_block_hashes", counts, "engine prompt hashes",
              lambda hashes, tokens, block_size, offset=0: not hashes and len(tokens) >= len(PROMPT))
    pdd, _, census, mesh = census_of_one_request(PROMPT, OUTPUT, prepare=lambda mesh: mesh)
    assert pdd["pipeline"] == "P-RLD-MD" and pdd["handoff"] is not None

    links = census.per_link()
    prompt_bytes = len(pack_ids(PROMPT))
    for service in ROUTER_HOPS:
        assert links[("router", service)].prompt_messages == 1, service
        assert links[("router", service)].prompt_bytes == prompt_bytes, service
    for service in ("main-decode", "relay-decode"):
        assert census.hops[("router", service, "CacheLookup")].prompt_messages == 1
        generate = census.hops[("router", service, "Generate")]
        assert generate.messages == 1 and generate.prompt_messages == 0 and generate.bytes < 100
    assert sum(h.prompt_messages for h in census.hops.values()) == len(ROUTER_HOPS)

    for service in ROUTER_HOPS:
        prompts = mesh.processes[service].stats()["prompts"]
        assert prompts["hashed"] == 1, service
        assert prompts["held_now"] == 0, service  # what a lookup left was taken by the call that named it
    assert counts == {"router fingerprints": 1}
    assert mesh.router.peers.resends.by_service == {}
    # one process in a simulation: the three services' shared memo hashed the prompt once for all of them
    assert (mesh.recent.misses, mesh.recent.hits) == (1, len(ROUTER_HOPS) - 1)


def _forgetting(*services: str):
    """Lookups at `services` leave nothing behind, as after an eviction or a restart between lookup and call."""
    def prepare(mesh):
        for service in services:
            mesh.processes[service].held.hold = lambda request_id, prompt: None
        return mesh
    return prepare


def test_a_service_that_lost_the_held_prompt_gets_the_ids_once_more_and_serves_the_same_text():
    reference = census_of_one_request(PROMPT, OUTPUT)
    pdd, token_ids, census, mesh = census_of_one_request(PROMPT, OUTPUT,
                                                         prepare=_forgetting("main-decode", "relay-decode"))
    assert token_ids == reference.token_ids and len(token_ids) == OUTPUT
    assert pdd["pipeline"] == "P-RLD-MD" and pdd["handoff"] is not None
    assert pdd["rld_tokens"] + pdd["md_tokens"] == OUTPUT
    for field in ("wan_bytes", "prefill_hit_tokens", "decode_hit_tokens", "degraded", "fallback"):
        assert pdd[field] == reference.pdd[field], field
    for service in ("main-decode", "relay-decode"):
        generate = census.hops[("router", service, "Generate")]
        assert generate.messages == 2 and generate.prompt_messages == 1  # refused by reference, then the ids
        assert mesh.processes[service].stats()["prompts"]["refused"] == 1
    assert mesh.router.peers.resends.by_service == {"main-decode": 1, "relay-decode": 1}
