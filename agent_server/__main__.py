"""``python -m agent_server`` runs the same entry point as the ``agent-server`` script."""

from agent_server.cli import main

raise SystemExit(main())
