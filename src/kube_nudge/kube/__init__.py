"""Kubernetes transport: raw-JSON client, resources, informer, Events, workload kinds."""

# Before any module of this package imports aiohttp (see lazycas).
from kube_nudge.kube import lazycas as _lazycas  # noqa: F401
