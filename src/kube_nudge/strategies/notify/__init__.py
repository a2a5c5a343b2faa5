"""Strategy ``notify``: announce a config change, never touch the workload."""

from kube_nudge.strategies.notify.strategy import NotifyStrategy

__all__ = ["NotifyStrategy"]
