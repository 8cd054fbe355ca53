"""``agent-server lsp``: serve the agent as a language server on stdin/stdout.

Role: parse ``--config``, keep stdout for the protocol (a private duplicate of descriptor 1; the
descriptor itself then points at stderr, so a stray ``print`` or a child process cannot corrupt
the stream), answer ``initialize`` before pygls loads (``initialize.py``), then log to stderr,
build the LSP front end (the session host is made when a command first needs it: a code action
never waits for its modules), and serve until the client exits (``shutdown`` + ``exit``) or
closes stdin.

Must never: be imported on the ACP path (it loads pygls), or import more than the standard
library's lightest modules before the ``initialize`` answer.
"""

from __future__ import annotations

import io
import os
import sys

USAGE = """usage: agent-server lsp [--config PATH]

Serve the agent as a language server (LSP 3.17, stdio) for editors without ACP: code actions
"Agent: fix this diagnostic" / "Agent: explain" / "Agent: add tests for this", and the commands
agentServer.ask {uri, range, prompt}, agentServer.newSession, agentServer.cancel.

options:
  --config PATH   read this TOML config file instead of the default
  -h, --help      show this help
"""


def main(argv: list[str]) -> int:
    """Entry point of ``agent-server lsp``; returns the exit status (2: bad arguments)."""
    args = list(argv)
    config_path = None
    while args:
        arg = args.pop(0)
        if arg in ("-h", "--help"):
            sys.stdout.write(USAGE)
            return 0
        if arg == "--stdio":  # what some editors pass to every language server
            continue
        if arg == "--config" and args:
            config_path = args.pop(0)
        elif arg.startswith("--config="):
            config_path = arg.split("=", 1)[1]
        else:
            sys.stderr.write(f"agent-server lsp: unknown argument {arg!r}\n\n{USAGE}")
            return 2
    out_fd = os.dup(1)
    os.dup2(2, 1)
    from agent_server.server.lsp.initialize import answer_initialize, read_message

    body, data = read_message(0)
    if not data:
        return 0  # end of input before any message: nothing to serve
    answered = answer_initialize(body, out_fd) if body is not None else None
    import gc

    gc.disable()  # while the modules load (as the ACP server's cli._end_gc_pause explains)
    import logging

    level = os.environ.get("AGENT_SERVER_LOG_LEVEL", "WARNING").upper()
    if not isinstance(logging.getLevelName(level), int):
        level = "WARNING"
    logging.basicConfig(stream=sys.stderr, level=level, format="agent-server lsp %(levelname)s %(name)s: %(message)s")
    if level != "DEBUG":
        logging.getLogger("pygls").setLevel(logging.WARNING)  # pygls logs every message at INFO

    from agent_server.server.lsp.server import build_server

    server = build_server(_make_host(config_path), _import_host)
    server.protocol.answered = answered
    gc.freeze()
    gc.enable()
    # buffered: pygls reads a message body with one read(n), which a raw pipe may answer short;
    # what the fast path read comes first, the initialize it answered included (pygls sets up from it)
    server.start_io(io.BufferedReader(_Prefed(data, 0)), os.fdopen(out_fd, "wb"))
    return 0


def _import_host() -> None:
    """Import what ``_make_host`` needs (run in a thread while the editor is idle)."""
    import agent_server.config.load  # noqa: F401
    import agent_server.host  # noqa: F401
    import agent_server.session  # noqa: F401


def _make_host(config_path: str | None):
    """The session host's maker: reads the configuration (an error is logged, and reported on
    every prompt), opens the session store."""
    def make():
        import logging

        from agent_server.config.load import ConfigError, load_config
        from agent_server.host import SessionHost
        from agent_server.session import SessionStore, default_state_dir

        config_error = None
        try:
            config = load_config(config_path)
        except ConfigError as exc:
            logging.getLogger("agent_server.lsp").error("%s", exc)
            config_error = str(exc)
            config = load_config(env={}, path=os.devnull)
        return SessionHost(config, SessionStore(default_state_dir()), config_error=config_error)

    return make


class _Prefed(io.RawIOBase):
    """Descriptor ``fd`` for reading, with ``data`` in front of what it has not given yet."""

    def __init__(self, data: bytes, fd: int) -> None:
        self._data, self._fd = memoryview(data), fd

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        if self._data:
            n = min(len(buffer), len(self._data))
            buffer[:n], self._data = self._data[:n], self._data[n:]
            return n
        return os.readv(self._fd, [buffer])
