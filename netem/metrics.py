"""Prometheus view of one link, read from link.stats() at scrape time.

Each link owns a CollectorRegistry, so several links in one process (the mesh
embeds them) never collide in the global registry, and the data path pays
nothing per byte for metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from netem.link import UserspaceLink

_COUNTERS = {
    "bytes": ("pdd_netem_delivered_bytes", "bytes written to the receiving end"),
    "bytes_in": ("pdd_netem_received_bytes", "bytes read from the sending end"),
    "chunks": ("pdd_netem_delivered_chunks", "chunks written to the receiving end"),
    "loss_stalls": ("pdd_netem_loss_stalls", "retransmission stalls from emulated segment loss"),
    "resets": ("pdd_netem_connection_resets", "connections reset by the link"),
    "connections_total": ("pdd_netem_connections", "connections accepted"),
}
_GAUGES = {
    "queue_bytes": ("pdd_netem_queue_bytes", "bytes held in the link"),
    "queue_limit_bytes": ("pdd_netem_queue_limit_bytes", "bytes the link may hold before it stops reading"),
    "connections": ("pdd_netem_open_connections", "connections open now"),
    "line_backlog_s": ("pdd_netem_line_backlog_seconds", "line time already promised to queued bytes"),
    "late_max_s": ("pdd_netem_late_max_seconds", "largest delay of a write past its deadline (emulator overhead)"),
    "timing_error_max_s": ("pdd_netem_timing_error_max_seconds", "largest write time minus deadline (emulator overhead)"),
    "timing_error_mean_s": ("pdd_netem_timing_error_mean_seconds", "mean write time minus deadline (emulator overhead)"),
}
_CONFIG = {
    "delay_s": ("pdd_netem_delay_seconds", "configured one-way delay"),
    "jitter_s": ("pdd_netem_jitter_seconds", "configured jitter scale"),
    "rate_bps": ("pdd_netem_rate_bits_per_second", "configured line rate (0: unlimited)"),
    "loss": ("pdd_netem_loss_ratio", "configured loss probability per loss unit"),
}


class LinkCollector(Collector):
    def __init__(self, link: UserspaceLink, name: str) -> None:
        self._link = link
        self._name = name

    def collect(self) -> Iterator[Metric]:
        stats = self._link.stats()
        config = self._link.config
        labels = ["link", "direction"]
        for key, (metric, doc) in _COUNTERS.items():
            family = CounterMetricFamily(metric, doc, labels=labels)
            for side, values in stats.items():
                family.add_metric([self._name, side], values[key])
            yield family
        for key, (metric, doc) in _GAUGES.items():
            family = GaugeMetricFamily(metric, doc, labels=labels)
            for side, values in stats.items():
                family.add_metric([self._name, side], values[key])
            yield family
        partition = GaugeMetricFamily("pdd_netem_partition", "1 while a partition is active", labels=[*labels, "mode"])
        for side, values in stats.items():
            for mode in ("blackhole", "reject"):
                partition.add_metric([self._name, side, mode], 1.0 if values["partition"] == mode else 0.0)
        yield partition
        for key, (metric, doc) in _CONFIG.items():
            family = GaugeMetricFamily(metric, doc, labels=labels)
            for side in ("up", "down"):
                family.add_metric([self._name, side], getattr(getattr(config, side), key) or 0.0)
            yield family


def link_registry(link: UserspaceLink, name: str = "link") -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(LinkCollector(link, name))
    return registry


def render(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)
