"""The control plane's generated gRPC code, one channel per peer.

The stubs are generated from proto/pdd/v1/control.proto when this module is
imported (grpcio-tools' `services`; the messages come from services/rpc/messages.py),
so the .proto file is the only source of truth and nothing generated is committed.
"""

from __future__ import annotations

import json

import grpc

from services.rpc.auth import TokenCheck, deployment_token, token_senders
from services.rpc.messages import PROTO, pb  # noqa: F401 (pb: re-exported, callers import it from here)

pb_grpc = grpc.services(PROTO)

REQUEST_ID_METADATA = "x-request-id"
# Names the caller's token feed (Decode.Tokens) that a Generate call sends its tokens through.
TOKEN_FEED_METADATA = "x-pdd-token-feed"
# KV announces and token streams are small; these bound what a peer may send us.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
# A peer that went away is back within about a second (its keeper restarts it), so the channel retries
# the connection every 100-250 ms instead of gRPC's default back-off (1 s, growing to 120 s), which
# kept requests failing for seconds after the peer was healthy again (docs/reliability.md).
RECONNECT_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 250),
]
# Calls that change nothing, Prefill (whose announce comes only after it runs) and Announce (a repeat
# records the same figures) are retried when the channel is not connected yet (UNAVAILABLE): a call made just as a restarted peer's channel comes back
# waits for it (5 attempts, about a second at most) instead of failing.
_RETRY = {"maxAttempts": 5, "initialBackoff": "0.1s", "maxBackoff": "0.4s", "backoffMultiplier": 2,
          "retryableStatusCodes": ["UNAVAILABLE"]}
SERVICE_CONFIG = json.dumps({"methodConfig": [{"name": [
    {"service": "pdd.v1.Decode", "method": "CacheLookup"}, {"service": "pdd.v1.Decode", "method": "Announce"},
    {"service": "pdd.v1.Decode", "method": "Health"},
    {"service": "pdd.v1.Decode", "method": "Stats"}, {"service": "pdd.v1.Prefill", "method": "Health"},
    {"service": "pdd.v1.Prefill", "method": "Stats"}, {"service": "pdd.v1.Prefill", "method": "Prefill"},
], "retryPolicy": _RETRY}]})
CHANNEL_OPTIONS = [
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_time_ms", 10_000),
]
CLIENT_OPTIONS = [*CHANNEL_OPTIONS, *RECONNECT_OPTIONS, ("grpc.enable_retries", 1),
                  ("grpc.service_config", SERVICE_CONFIG)]


def channel(address: str, token: str | None = None) -> grpc.aio.Channel:
    """One long-lived channel per peer, created at start-up and closed at shutdown.

    Every call carries the deployment token (services/rpc/auth.py): `token`, else the process's own
    from its environment; without either the calls go bare, and an authenticating peer refuses them."""
    token = token or deployment_token()
    interceptors = token_senders(token) if token else None
    return grpc.aio.insecure_channel(address, options=CLIENT_OPTIONS, interceptors=interceptors)


def server(check: TokenCheck) -> grpc.aio.Server:
    """A server that refuses every call without the deployment token before any servicer sees it."""
    return grpc.aio.server(options=CHANNEL_OPTIONS, interceptors=[check])


def metadata(request_id: str, token_feed: str = "") -> tuple[tuple[str, str], ...]:
    if token_feed:
        return (REQUEST_ID_METADATA, request_id), (TOKEN_FEED_METADATA, token_feed)
    return ((REQUEST_ID_METADATA, request_id),)


def metadata_value(context: grpc.aio.ServicerContext, key: str) -> str:
    """The value of one invocation-metadata key of a call, "" when absent."""
    for item in context.invocation_metadata() or ():
        if item.key == key:
            return item.value
    return ""
