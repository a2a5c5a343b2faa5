"""kube-nudge benchmark suite: ``python -m bench.run`` (``make bench``)."""
