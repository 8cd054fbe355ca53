"""Command line: ``agent-server`` (the stdio ACP server) and its sub-commands.

Role: the process entry point. ``agent-server replay …`` hands over to ``replay_cli``, ``run …``
to ``headless``, ``sessions …`` to ``sessions_cli``. With no sub-command it serves ACP on stdio
(saying on stderr what it waits for when stdin is a terminal), answering the first
``initialize`` before ``asyncio``, ``httpx`` and pydantic are imported (start-up is a feature:
the editor waits for that answer) — and the ``session/new`` right after it when it is the plain
case (``server/fast_session.py``) — then hands everything else, and the session it made, to the
server. Whatever the sub-command, the process finds no pydantic plugins (``process_trims``); the
server's modules load with the garbage collector paused (``_end_gc_pause``). Before any of that,
a warm spare may serve the launch instead (``spare/_launcher.handoff``: a fork of a process that
has the modules loaded runs ``_serve``; there the full server answers ``session/new``).

Must never: let anything but protocol messages reach the real stdout. The protocol gets a private
duplicate of descriptor 1, and descriptor 1 itself is pointed at stderr, so a stray ``print`` (or
a child process) cannot corrupt the stream.
"""

from __future__ import annotations

import os
import sys

_USAGE = """usage: agent-server [--config PATH]
       agent-server --check-config [--config PATH]
       agent-server run -p PROMPT [--config PATH] [--cwd DIR] [--mode MODE] [--resume ID] [--json] [--allow shell,edit]
       agent-server sessions [--cwd DIR] [--json]
       agent-server replay SESSION_ID|SESSION_LOG [--step N] [--json]
       agent-server lsp [--config PATH]
       agent-server login [--config PATH]
       agent-server logout [--profile NAME | --all]
       agent-server spare status|stop [--json]

Serve the Agent Client Protocol (ACP v1) on stdin/stdout for an editor.
"run" runs one prompt without an editor (same sessions and log); see `agent-server run --help`.
"sessions" lists the stored sessions (id, age, folder, title, log).
"replay" rebuilds, from a session log alone, the exact body of every model request it made.
"lsp" serves the same agent as a language server (LSP) for editors without ACP.
"login" signs in to a model provider (provider, API key, model; checked, then stored in the
system keyring or a file only you can read); "logout" removes the stored key.
"spare" lists or stops this user's warm spares (a process that already loaded the server and
serves the next launch; AGENT_SERVER_SPARE=off turns them off).

options:
  --config PATH   read this TOML config file instead of the default
  --version       print the version and exit
  --check-config  read the configuration (file and environment) as the server would; print where it
                  came from and exit 0, or the error (file, line, column) and exit 1
  -h, --help      show this help
"""


FAST_LINE_LIMIT = 1 << 20
"""Longest line the fast path reads for itself (an ``initialize`` or ``session/new`` is far
shorter); a longer one is left whole to the engine, which takes any size in linear time and
answers one past ``jsonrpc.MAX_LINE_BYTES`` with ``-32600``."""


def _read_first_line(fd: int, buffer: bytes = b"", limit: int = FAST_LINE_LIMIT) -> tuple[bytes, bytes]:
    """Read from ``fd`` until the first newline (after what ``buffer`` already holds); returns
    ``(line, rest)`` (rest may be b""; line is b"" or unterminated at end of input). A line that
    passes ``limit`` bytes is not read further: ``(b"", everything read)``. Linear in what it
    reads (each chunk is searched once, the pieces joined once)."""
    if b"\n" in buffer:
        line, _, rest = buffer.partition(b"\n")
        return line + b"\n", rest
    pieces, size = [buffer], len(buffer)
    while size <= limit:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return b"".join(pieces), b""
        end = chunk.find(b"\n")
        if end >= 0:
            pieces.append(chunk[:end + 1])
            return b"".join(pieces), chunk[end + 1:]
        pieces.append(chunk)
        size += len(chunk)
    return b"", b"".join(pieces)


def _fast_initialize(line: bytes, out_fd: int) -> dict | None:
    """Answer ``line`` at once if it is an ``initialize`` request; return its params, else None."""
    import json  # here, not at the top: a launch a warm spare serves never needs it (spare/_launcher.py)

    try:
        message = json.loads(line)
    except (ValueError, RecursionError):
        return None  # the engine answers it with -32700
    if not (isinstance(message, dict) and message.get("method") == "initialize"
            and message.get("jsonrpc") == "2.0" and type(message.get("id")) in (int, str)):
        return None
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return None
    from agent_server.server.initialize import initialize_result

    from agent_server.server.wire import write_all

    response = {"jsonrpc": "2.0", "id": message["id"], "result": initialize_result(params or {})}
    write_all(out_fd, (json.dumps(response, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii"))
    return params or {}


def _after_initialize(rest: bytes, out_fd: int, config_path: str | None) -> tuple[object, bytes]:
    """Once ``initialize`` is answered: answer the client's next message at once if it is a
    plain-case ``session/new`` (``server/fast_session.py``); returns ``(HandedSession or None,
    the bytes for the server)``.

    A client that sends nothing for ``_IDLE_BEFORE_LOADING`` s meanwhile gets the server's modules
    loaded in a thread while it is idle, so a later request finds them loaded; one that sends at
    once does not (two threads sharing the interpreter made that ``session/new`` slower, and the
    prompt after it no faster: measured in bench/README.md). SIGTERM and SIGHUP end the process
    with status 0 from now until the server's own handlers take over, as the server does when
    nothing runs (the only thing written so far, a log's header, is on disk before its answer)."""
    import select
    import signal

    from agent_server.server import fast_session  # with its modules: a loader thread never races it on one

    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _exit_quietly)
    loader = None
    if b"\n" not in rest and not select.select([0], [], [], _IDLE_BEFORE_LOADING)[0]:
        import threading

        if not (os.environ.get("XDG_CONFIG_HOME") and os.environ.get("AGENT_SERVER_STATE_DIR")):
            import platformdirs  # noqa: F401 — what the fast path may still import, before the thread starts
        # the default switch interval: 0.5 ms made start-up ~1.5x slower on a loaded machine
        loader = threading.Thread(target=_load_server, name="agent-server-imports", daemon=True)
        loader.start()
    try:
        second, rest = _read_first_line(0, rest)
        handed = fast_session.fast_new_session(second, out_fd, config_path) if second.endswith(b"\n") else None
    finally:
        if loader is not None:
            loader.join()
    return handed, (rest if handed is not None else second + rest)


_IDLE_BEFORE_LOADING = 0.02
"""Seconds without a message after the ``initialize`` answer before the server's modules load in
a thread (an editor that sends ``session/new`` at once is answered before they load)."""


def _load_server() -> None:
    """Import what ``serve_stdio`` needs (asyncio, the ACP server, the host, pydantic, httpx …)."""
    try:
        import asyncio  # noqa: F401
        import logging  # noqa: F401

        import agent_server.config  # noqa: F401
        import agent_server.server.acp  # noqa: F401
        import agent_server.server.stdio  # noqa: F401
    except BaseException:  # noqa: BLE001 — the main thread imports them again and meets the error itself
        pass


def _end_gc_pause() -> None:
    """End the pause of the garbage collector ``_serve`` began before the server's imports.

    Loading the server builds ~55,000 objects that live as long as the process (modules, classes,
    functions, pydantic schemas); collecting while they were built took ~5 % of the start-up (its
    young generation was scanned ~90 times), and every later full collection would walk them all
    again. So the collector is off while they load, and what it tracks then is frozen
    (``gc.freeze``, as ``session._parse`` does for a loaded log) before it is switched back on: the
    few hundred objects that were already garbage cycles by then are kept (tens of kB, once).
    """
    import gc

    gc.freeze()
    gc.enable()


def _exit_quietly(signum: int, frame: object) -> None:
    os._exit(0)


_ON_A_TERMINAL = ("agent-server: waiting for an ACP client on stdin (JSON-RPC, one message a line): an editor "
                  "starts this command itself.\n  To try it from a terminal: agent-server run -p \"your prompt\""
                  " (see agent-server --help); Ctrl-D quits.\n")


def _serve(config_path: str | None) -> int:
    import gc  # built in

    gc.disable()  # until the server's modules are loaded: see _end_gc_pause
    out_fd = os.dup(1)
    os.dup2(2, 1)
    if os.isatty(0):  # a person, not an editor: say what this is waiting for
        os.write(2, _ON_A_TERMINAL.encode())
    first, rest = _read_first_line(0)
    if not first and not rest:
        return 0  # end of input before any message: nothing to serve
    answered = _fast_initialize(first, out_fd) if first else None
    prefeed = rest if answered is not None else first + rest
    handed = None
    if answered is not None and "agent_server.server.stdio" in sys.modules:
        # the fast session/new answers before the server's imports; in a process that has them
        # already (a warm spare's fork: spare/_daemon.py) the server answers it, having set up
        # first — the set-up a prompt sent right after the answer would otherwise wait for
        import signal

        for signum in (signal.SIGTERM, signal.SIGHUP):  # as _after_initialize: until the server's own
            signal.signal(signum, _exit_quietly)
    elif answered is not None:
        handed, prefeed = _after_initialize(rest, out_fd, config_path)

    import asyncio
    import logging

    level = os.environ.get("AGENT_SERVER_LOG_LEVEL", "WARNING").upper()
    if not isinstance(logging.getLevelName(level), int):
        sys.stderr.write(f"agent-server: unknown AGENT_SERVER_LOG_LEVEL {level!r}; using WARNING\n")
        level = "WARNING"
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="agent-server %(levelname)s %(name)s: %(message)s")
    from agent_server.server.stdio import serve_stdio

    try:
        try:  # what serve_stdio imports first, while the collector is paused
            import agent_server.config  # noqa: F401
            import agent_server.server.acp  # noqa: F401
        except Exception:  # noqa: BLE001 — serve_stdio imports them again and meets the error there, as before
            pass
        _end_gc_pause()
        return asyncio.run(serve_stdio(in_fd=0, out_fd=out_fd, prefeed=prefeed,
                                       answered_initialize=answered, answered_session=handed,
                                       config_path=config_path))
    except KeyboardInterrupt:
        return 130


def _die_quietly_on_closed_pipe() -> None:
    """For the commands that only print (``replay``, ``sessions``): a reader that stops early
    (``| head``) ends the process as it ends ``cat`` or ``ls`` — killed by ``SIGPIPE``, status 141
    in the shell, nothing on stderr — instead of Python's ``BrokenPipeError`` traceback."""
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``agent-server`` script; returns the exit status."""
    from agent_server import process_trims

    process_trims.apply()  # before any import of pydantic: no plugin discovery in this process
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "replay":  # a sub-command: the server path (no arguments) never gets here
        from agent_server.replay_cli import main as replay_main

        _die_quietly_on_closed_pipe()
        return replay_main(args[1:])
    if args and args[0] == "sessions":
        from agent_server.sessions_cli import main as sessions_main

        _die_quietly_on_closed_pipe()
        return sessions_main(args[1:])
    if args and args[0] == "run":
        from agent_server.headless import main as run_main

        return run_main(args[1:])
    if args and args[0] == "lsp":  # the LSP front end: pygls is loaded only here
        from agent_server.server.lsp.main import main as lsp_main

        return lsp_main(args[1:])
    if args and args[0] == "spare":
        from agent_server.spare.cli import main as spare_main

        return spare_main(args[1:])
    config_path = None
    check_config = False
    while args:
        arg = args.pop(0)
        if arg == "--check-config":
            check_config = True
            continue
        if arg in ("-h", "--help"):
            sys.stdout.write(_USAGE)
            return 0
        if arg == "--version":
            from agent_server import __version__

            sys.stdout.write(f"agent-server {__version__}\n")
            return 0
        if arg == "--config" and args:
            config_path = args.pop(0)
        elif arg.startswith("--config="):
            config_path = arg.split("=", 1)[1]
        elif arg in ("login", "logout"):  # also after the options: ACP terminal auth appends "login"
            from agent_server import login_cli

            return (login_cli.main if arg == "login" else login_cli.logout_main)(args, config_path)
        elif arg in ("run", "lsp"):  # `agent-server --config X run …` means `agent-server run --config X …`
            return main([arg, *(["--config", config_path] if config_path else []), *args])
        else:
            sys.stderr.write(f"agent-server: unknown argument {arg!r}\n\n{_USAGE}")
            return 2
    if check_config:
        return _check_config(config_path)
    from agent_server.spare._launcher import handoff

    status = handoff(sys.argv, config_path)  # a warm spare's fork serves this launch (spare/_launcher.py)
    if status is not None:
        return status
    return _serve(config_path)


def _check_config(config_path: str | None) -> int:
    """``--check-config`` (``:checkhealth agent_server`` runs it): load the configuration, say how it went."""
    from agent_server.config import ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        sys.stderr.write(f"agent-server: configuration error: {exc}\n")
        return 1
    sys.stdout.write(f"configuration OK: {config.source or 'no config file (defaults and the environment)'}; "
                     f"profile {config.provider.profile!r}, model {config.provider.model or '(none)'!r}\n")
    return 0
