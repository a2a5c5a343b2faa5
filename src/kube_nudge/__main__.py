"""``python -m kube_nudge`` runs the command line."""

from kube_nudge.app.cli import main

raise SystemExit(main())
