"""The warm spare: a process that already imported the server, forking one server per launch.

An editor starts ``agent-server`` afresh for each window or session; a fresh Python process needs
~175 ms of imports (asyncio, httpx, pydantic, ours) before it can serve a prompt. A warm spare
(like Gradle's daemon or Android's zygote) has paid them once: ``_launcher.handoff`` passes a
launch's descriptors to it, and a fork of the spare serves that launch (``_launcher.py``: where,
the key and the protocol; ``_daemon.py``: the spare, its lifetime and the audit of what reads the
environment at import time; ``cli.py``: ``agent-server spare status|stop``).

Public surface (standard library only, cheap to import): ``spare_folder(env)`` — the folder of
this user's spares for an environment (the shell sandbox masks it); ``spare_folders(env)`` — it and
the default folders of any launch (all masked); ``disabled(env)`` — whether
``AGENT_SERVER_SPARE=off`` turns them off; the variable names.
"""

from agent_server.spare._launcher import DIR_ENV, IDLE_ENV, SPARE_ENV, disabled, spare_folder, spare_folders

__all__ = ["DIR_ENV", "IDLE_ENV", "SPARE_ENV", "disabled", "spare_folder", "spare_folders"]
