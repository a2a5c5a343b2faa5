"""Kubernetes transport: raw-JSON client, resources, informer, Events, workload kinds."""
