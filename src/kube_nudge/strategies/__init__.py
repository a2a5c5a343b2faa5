"""Strategies: how a decided config change reaches a workload (``kube-nudge.io/strategy``)."""
