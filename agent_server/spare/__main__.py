"""``python -P -m agent_server.spare FOLDER KEY LOCK_FD IDLE``: the warm spare (``_daemon.py``),
started by ``agent-server`` itself (``_launcher.start_spare``)."""

import sys

from agent_server.spare._daemon import main

sys.exit(main(sys.argv[1:]))
