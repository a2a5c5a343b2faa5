"""Wait for a condition on API objects by watching them (list, then watch from its version),
or for any async check by polling it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from kube_nudge.kube.client import JSON, KubeClient
from kube_nudge.model.progress import rollout_complete


async def wait_for_objects(
    client: KubeClient,
    path: str,
    condition: Callable[[dict[str, JSON]], bool],
    *,
    timeout: float,
    params: Mapping[str, str | int] | None = None,
) -> dict[str, JSON]:
    """Watch the collection at ``path`` until ``condition(objects by name)`` holds.

    Returns the objects that satisfied it; raises ``TimeoutError`` after ``timeout`` s.
    """
    async with asyncio.timeout(timeout):
        objects: dict[str, JSON] = {}
        resource_version = ""
        async for items, page_version in client.list_pages(path, params):
            resource_version = page_version
            objects.update((item["metadata"]["name"], item) for item in items)
        if condition(objects):
            return objects
        while True:
            async for event in client.watch(path, params, resource_version=resource_version):
                obj = event.get("object") or {}
                metadata = obj.get("metadata") or {}
                resource_version = str(metadata.get("resourceVersion", resource_version))
                if event.get("type") == "BOOKMARK":
                    continue
                if event.get("type") == "DELETED":
                    objects.pop(metadata.get("name", ""), None)
                else:
                    objects[metadata.get("name", "")] = obj
                if condition(objects):
                    return objects


async def wait_for_object(
    client: KubeClient,
    collection_path: str,
    name: str,
    condition: Callable[[JSON], bool],
    *,
    timeout: float,
) -> JSON:
    """Watch one object (by name in ``collection_path``) until ``condition(object)`` holds."""
    found = await wait_for_objects(
        client,
        collection_path,
        lambda objects: name in objects and condition(objects[name]),
        timeout=timeout,
        params={"fieldSelector": f"metadata.name={name}"},
    )
    return found[name]


def deployment_complete(obj: JSON) -> bool:
    """True when a Deployment's latest template is fully rolled out and every replica is
    ready and available (what ``kubectl rollout status`` waits for)."""
    return rollout_complete("Deployment.apps", obj) is True


async def until(check: Callable[[], Awaitable[bool]], timeout: float) -> None:
    """Wait until an async check (e.g. an HTTP probe of a replica) passes."""
    async with asyncio.timeout(timeout):
        while not await check():  # noqa: ASYNC110 - a probe no event tells us about
            await asyncio.sleep(0.1)
