"""kube-nudge: roll Kubernetes workloads exactly when the config they consume changes."""

__version__ = "0.1.0"
