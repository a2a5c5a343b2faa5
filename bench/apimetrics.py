"""Requests the API server counted (``apiserver_request_total``), read from its /metrics.

Counts are kept by (verb, resource); long-running requests (WATCH) are counted only when
they end, and Leases and non-resource URLs (/metrics itself, /healthz) are background, so
all three are left out.
"""

from __future__ import annotations

from collections import Counter

from prometheus_client.parser import text_string_to_metric_families

from kube_nudge.kube.client import KubeClient

Requests = Counter[tuple[str, str]]
METRIC = "apiserver_request_total"
LEFT_OUT_VERBS = frozenset({"WATCH", "CONNECT"})
LEFT_OUT_RESOURCES = frozenset({"", "leases"})
READS = frozenset({"GET", "LIST"})


async def requests(kube: KubeClient) -> Requests:
    """The API server's request counts now, by (verb, resource)."""
    reply = await kube.http.request("GET", "/metrics", None, None, {"Accept": "text/plain"})
    if reply.status != 200:
        raise RuntimeError(f"GET /metrics answered {reply.status}: {reply.content[:200]!r}")
    return parse(reply.content.decode())


def parse(text: str) -> Requests:
    """``apiserver_request_total`` samples of a /metrics text, summed by (verb, resource)."""
    lines = "\n".join(line for line in text.splitlines() if line.startswith(METRIC + "{"))
    counts: Requests = Counter()
    for family in text_string_to_metric_families(lines):
        for sample in family.samples:
            verb, resource = sample.labels.get("verb", ""), sample.labels.get("resource", "")
            if verb in LEFT_OUT_VERBS or resource in LEFT_OUT_RESOURCES:
                continue
            counts[(verb, resource)] += int(sample.value)
    return counts


def split(delta: Requests) -> tuple[int, int, int]:
    """(all, reads, writes) of a difference of two readings."""
    reads = sum(n for (verb, _), n in delta.items() if verb in READS)
    total = sum(delta.values())
    return total, reads, total - reads
