"""``python -m kube_nudge_dev``: the same as the ``kube-nudge-dev`` command."""

from kube_nudge_dev.cli import main

raise SystemExit(main())
