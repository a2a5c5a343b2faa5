"""``python -m kube_nudge`` runs the command line."""

from kube_nudge.launch import main

raise SystemExit(main())
