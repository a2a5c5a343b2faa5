"""The API objects the scenarios create, and creating many of them quickly."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import Iterable
from pathlib import Path

from bench.progress import say
from kube_nudge.kube.client import JSON, ClientOptions, KubeClient
from kube_nudge_dev.admin import AdminClient

#: The benchmark's own user agent: never matches a tool's prefix in the audit log.
BENCH_AGENT = "nudge-bench/1"
CREATE_CONCURRENCY = 50
CONTAINER = {"name": "app", "image": "registry.invalid/app:1"}


def bench_client(kubeconfig: Path) -> AdminClient:
    """An admin client without the client-side write limit (we create thousands)."""
    options = ClientOptions(write_qps=100_000.0, write_burst=100_000, timeout=60.0)
    return AdminClient.from_config(kubeconfig, options=options, user_agent=BENCH_AGENT)


def configmap(name: str, data: dict[str, str]) -> JSON:
    """A v1 ConfigMap."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def random_text(size: int) -> str:
    """``size`` characters of random base64 text."""
    return base64.b64encode(os.urandom(size * 3 // 4 + 3)).decode()[:size]


def random_secret(name: str, size: int) -> JSON:
    """An Opaque Secret whose one key holds ``size`` characters of random base64 text."""
    text = random_text(size)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name},
        "data": {"blob": base64.b64encode(text.encode()).decode()},
    }


def configmap_env(name: str, key: str) -> JSON:
    """An env var read from a ConfigMap key."""
    return {"name": "VALUE", "valueFrom": {"configMapKeyRef": {"name": name, "key": key}}}


def secret_env(name: str, key: str) -> JSON:
    """An env var read from a Secret key."""
    return {"name": "VALUE", "valueFrom": {"secretKeyRef": {"name": name, "key": key}}}


def deployment(name: str, annotations: dict[str, str], env: list[JSON]) -> JSON:
    """A Deployment with zero replicas (rollouts create ReplicaSets, never pods)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "annotations": dict(annotations)},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{**CONTAINER, "env": env}]},
            },
        },
    }


async def create_all(
    kube: KubeClient, items: Iterable[tuple[str, JSON]], total: int, what: str
) -> float:
    """POST every (collection path, body) with CREATE_CONCURRENCY workers; return seconds.

    ``items`` may be a generator: bodies are built as they are sent, never all at once.
    """
    iterator = iter(items)
    started = time.perf_counter()
    done = 0
    step = max(total // 4, 1)

    async def worker() -> None:
        nonlocal done
        for path, body in iterator:  # next() never awaits, so workers can share it
            await kube.create(path, body)
            done += 1
            if done % step == 0 and done < total:
                say(f"  created {done}/{total} {what}")

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))
    seconds = time.perf_counter() - started
    say(f"  created {done} {what} in {seconds:.1f} s ({done / seconds:.0f}/s)")
    return seconds
