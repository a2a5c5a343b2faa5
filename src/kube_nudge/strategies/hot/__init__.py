"""Strategy ``hot``: reload in place what refreshed volumes carry, roll for the rest."""

from kube_nudge.strategies.hot.strategy import HotStrategy, pod_report

__all__ = ["HotStrategy", "pod_report"]
