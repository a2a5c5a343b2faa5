"""Strategy ``snapshot``: roll onto immutable copies of the config (``strategy.py``, through
``rolling.py``, ``upkeep.py`` and ``rollback.py``), with its admission webhook
(``webhook.py``, deciding in the pure ``admission.py``)."""

from kube_nudge.strategies.snapshot.strategy import SnapshotStrategy
from kube_nudge.strategies.snapshot.webhook import WEBHOOK_PATH, SnapshotWebhook

__all__ = ["WEBHOOK_PATH", "SnapshotStrategy", "SnapshotWebhook"]
