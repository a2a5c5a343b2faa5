"""kube-nudge's development tools (a separate distribution, never installed with the
product): building and running the local control plane, and the demo."""
