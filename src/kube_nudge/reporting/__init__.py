"""Reporting: what the CLI reads straight from the API, with no controller running.

- ``status``: which pods run which config (``kube-nudge status``, ``kube-nudge wait``).
- ``desired``: a workload's desired config hash computed afresh from its sources, the
  independent check of what the controller converges to.
- ``audit``: the drift audit (``run --audit-interval``), the status report as metrics.
- ``hmackey``: the installation key the hashes are keyed with, read by the commands that
  compare hashes and created by ``run`` at start.

The layer sits between the controller and the app. It never imports the running controller
(``kube_nudge.controller``): an import-linter contract in pyproject.toml holds it, and the
read-only commands, to that.
"""
