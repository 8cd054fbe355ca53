"""The ``agent-server`` command: ``main`` parses the arguments and dispatches (``cli/main.py``);
``serve`` is the stdio ACP path, ``run`` + ``approvals`` the headless one, ``sessions``,
``replay``, ``login`` the other sub-commands, ``trims`` what every sub-command's process trims.

``main`` is imported here (``agent_server.cli:main`` is the console script of every installed
``.venv``); ``cli/main.py`` imports only the standard library, so this costs nothing on the fast
path. The module itself: ``importlib.import_module("agent_server.cli.main")`` (the package's
``main`` attribute is the function).
"""

from agent_server.cli.main import main

__all__ = ["main"]
