"""Kubernetes transport: raw-JSON client, resources, informer, events, waiting."""
