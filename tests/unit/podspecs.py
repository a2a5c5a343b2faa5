"""Generated pod specs for the property tests: each makes references to ConfigMaps and
Secrets in every form a pod spec has (a volume, a projected source, env, envFrom, an init
container's env), with listed keys and mounts that show the whole volume or a part of it."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

__all__ = ["ITEM_PATHS", "KEYS", "MOUNTS", "NAMES", "Ref", "refs_st", "render"]

NAMES, KEYS = ["a", "b", "c"], ["k1", "k2", "k3"]

Ref = tuple[str, str, str, tuple[str, ...], tuple[str, ...]]
"""(kind, name, form, keys, mounts) of one reference a pod spec makes; a volume's mounts,
one container each: ``whole``, ``subPath:PATH`` or ``subPathExpr:EXPR`` (none: unmounted)."""
ITEM_PATHS = ["d/p0", "p1", "d/e/./p2"]
"""Where the j-th listed key of a volume lands: nested paths make directories."""
MOUNTS = ["whole", *(f"subPath:{path}" for path in ["k1", "k3", "d", "./d/", "d/p0", "p1",
          "d/e", "d/p0/x", "."]), "subPathExpr:$(POD_NAME)", "subPathExpr:k2"]  # fmt: skip
refs_st = st.tuples(
    st.sampled_from(["configmap", "secret"]),
    st.sampled_from(NAMES),
    st.sampled_from(["volume", "projected", "env", "envFrom", "init env"]),
    st.lists(st.sampled_from(KEYS), min_size=1, max_size=2, unique=True).map(tuple) | st.just(()),
    st.lists(st.sampled_from(MOUNTS), max_size=2).map(tuple),
)


def mounts(volume: str, wanted: tuple[str, ...], i: int) -> list[dict[str, Any]]:
    """A container per mount of ``volume``."""
    containers = []
    for j, how in enumerate(wanted):
        mount = {"name": volume, "mountPath": "/m"}
        if how != "whole":
            field, _, path = how.partition(":")
            mount[field] = path
        containers.append({"name": f"m{i}-{j}", "volumeMounts": [mount]})
    return containers


def render(refs: list[Ref]) -> dict[str, Any]:
    """A pod spec making each reference, in its own volume or container."""
    spec: dict[str, Any] = {"volumes": [], "containers": [], "initContainers": []}
    for i, (kind, name, form, keys, wanted) in enumerate(refs):
        cm = kind == "configmap"
        items = [{"key": k, "path": ITEM_PATHS[j]} for j, k in enumerate(keys)]
        if form == "volume":
            source = {"name" if cm else "secretName": name, **({"items": items} if items else {})}
            spec["volumes"].append({"name": f"v{i}", "configMap" if cm else "secret": source})
            spec["containers"] += mounts(f"v{i}", wanted, i)
        elif form == "projected":
            source = {"name": name, **({"items": items} if items else {})}
            sources = [{"downwardAPI": {}}, {"configMap" if cm else "secret": source}]
            spec["volumes"].append({"name": f"v{i}", "projected": {"sources": sources}})
            spec["containers"] += mounts(f"v{i}", wanted, i)
        elif form.endswith("envFrom"):
            env_from = [{"configMapRef" if cm else "secretRef": {"name": name}}]
            spec["containers"].append({"name": f"c{i}", "envFrom": env_from})
        else:
            ref = {"name": name, "key": keys[0] if keys else "k1"}
            env = [{"name": "X", "valueFrom": {"configMapKeyRef" if cm else "secretKeyRef": ref}}]
            where = "initContainers" if form.startswith("init") else "containers"
            spec[where].append({"name": f"c{i}", "env": env})
    return spec
