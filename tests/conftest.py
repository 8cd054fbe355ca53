"""Shared pytest set-up: ``tests/`` on ``sys.path`` so ``support`` imports, and its ACP fixtures;
``AGENT_SERVER_SPARE=off`` for every agent the suite starts (no warm spare)."""

import os
import sys
from pathlib import Path

# Every agent the suite starts runs cold and starts no warm spare (agent_server/spare/): the tests
# give each agent a fresh HOME and state folder, and a spare would outlive them. tests/spare turns
# it on for its own agents, each with a private AGENT_SERVER_SPARE_DIR.
os.environ["AGENT_SERVER_SPARE"] = "off"

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from support.fixtures import *  # noqa: E402,F401,F403


def _spares() -> set[int]:
    """Pids of the warm spares this checkout's interpreter runs (``python … -m agent_server.spare``),
    not their forks (a standby, or the server of some launch: those share the command line)."""
    argvs: dict[int, list[bytes]] = {}
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
                parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if b"agent_server.spare" in argv and argv[0] == os.fsencode(sys.executable):
                argvs[int(entry)] = argv
    return {pid for pid, argv in argvs.items() if argvs.get(parents.get(pid, 0)) != argv}


_BEFORE: set[int] = set()


def pytest_sessionstart(session):
    _BEFORE.update(_spares())


def pytest_sessionfinish(session, exitstatus):
    """A safety net: a spare that a test's agent started (an environment without
    ``AGENT_SERVER_SPARE=off``) is stopped, and named, rather than left running for 30 min. Only
    the spare itself gets the SIGTERM: it stops serving at once, and the servers it forked — a
    developer's editor's, say — run on to their end."""
    import signal

    leaked = sorted(_spares() - _BEFORE)
    for pid in leaked:
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if leaked and reporter is not None:
        reporter.write_line(f"tests/conftest.py: stopped {len(leaked)} warm spare(s) the tests left running "
                            f"(pids {leaked}): some test starts agent-server without AGENT_SERVER_SPARE=off", red=True)
