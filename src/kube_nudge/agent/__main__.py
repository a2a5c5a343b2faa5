"""``python -m kube_nudge.agent``: the agent without the controller's command line."""

from kube_nudge.agent.main import main

raise SystemExit(main())
