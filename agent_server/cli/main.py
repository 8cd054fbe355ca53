"""Command line: ``agent-server`` (the stdio ACP server) and its sub-commands.

Role: argument parsing and dispatch only. ``agent-server replay …`` hands over to ``cli.replay``,
``run …`` to ``cli.run``, ``sessions …`` to ``cli.sessions``, ``login``/``logout`` to ``cli.login``,
``lsp`` to the LSP front end; with no sub-command ``cli.serve`` serves ACP on stdio. Whatever the
sub-command, the process finds no pydantic plugins (``cli.trims``).

Must never: import more than the standard library before it knows the sub-command (the stdio
server answers ``initialize`` before ``asyncio``, ``httpx`` and pydantic are loaded).
"""

from __future__ import annotations

import sys

_USAGE = """usage: agent-server [--config PATH]
       agent-server --check-config [--json] [--probe] [--config PATH]
       agent-server run -p PROMPT [--config PATH] [--cwd DIR] [--mode MODE] [--resume ID] [--json] [--allow shell,edit]
       agent-server sessions [--cwd DIR] [--json]
       agent-server replay SESSION_ID|SESSION_LOG [--step N] [--json]
       agent-server lsp [--config PATH]
       agent-server login [--config PATH]
       agent-server logout [--profile NAME | --all]

Serve the Agent Client Protocol (ACP v1) on stdin/stdout for an editor.
"run" runs one prompt without an editor (same sessions and log); see `agent-server run --help`.
"sessions" lists the stored sessions (id, age, folder, title, log).
"replay" rebuilds, from a session log alone, the exact body of every model request it made.
"lsp" serves the same agent as a language server (LSP) for editors without ACP.
"login" signs in to a model provider (provider, API key, model; checked, then stored in the
system keyring or a file only you can read); "logout" removes the stored key.

options:
  --config PATH   read this TOML config file instead of the default
  --version       print the version and exit
  --check-config  read the configuration (file and environment) as the server would; print where it
                  came from and exit 0, or the error (file, line, column) and exit 1; with --json one
                  JSON object (source, profile, model, baseUrl, keyRequired, keySource, keyVariable,
                  configOptions: a new session's mode and model; or error) — what an editor shows on
                  its first-run page and pickers (never the key)
  --probe         with --check-config: also ask the endpoint (GET <base_url>/models with the key, as
                  `agent-server login` checks it; a short timeout); exit 1 when it cannot be reached
                  or refuses the key; with --json its outcome is "endpoint": {ok, message}
  -h, --help      show this help
"""



def _die_quietly_on_closed_pipe() -> None:
    """For the commands that only print (``replay``, ``sessions``): a reader that stops early
    (``| head``) ends the process as it ends ``cat`` or ``ls`` — killed by ``SIGPIPE``, status 141
    in the shell, nothing on stderr — instead of Python's ``BrokenPipeError`` traceback."""
    import signal

    signal.signal(signal.SIGPIPE, signal.SIG_DFL)


def main(argv: list[str] | None = None, *, own_process: bool | None = None) -> int:
    """Entry point of the ``agent-server`` script; returns the exit status. ``own_process``
    (default: ``argv`` is ``None``, the script's own call): ``run`` ends the process itself
    (``cli.run.exit_process``)."""
    own = argv is None if own_process is None else own_process
    from agent_server.cli import trims as process_trims

    process_trims.apply()  # before any import of pydantic: no plugin discovery in this process
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "replay":  # a sub-command: the server path (no arguments) never gets here
        from agent_server.cli.replay import main as replay_main

        _die_quietly_on_closed_pipe()
        return replay_main(args[1:])
    if args and args[0] == "sessions":
        from agent_server.cli.sessions import main as sessions_main

        _die_quietly_on_closed_pipe()
        return sessions_main(args[1:])
    if args and args[0] == "run":
        from agent_server.cli.run import exit_process, main as run_main

        status = run_main(args[1:])
        return exit_process(status) if own else status
    if args and args[0] == "lsp":  # the LSP front end: pygls is loaded only here
        from agent_server.server.lsp.main import main as lsp_main

        return lsp_main(args[1:])
    config_path = None
    check_config = False
    as_json = False
    probe = False
    while args:
        arg = args.pop(0)
        if arg == "--check-config":
            check_config = True
            continue
        if arg == "--json":  # only with --check-config (checked below)
            as_json = True
            continue
        if arg == "--probe":  # only with --check-config (checked below)
            probe = True
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
            from agent_server.cli import login as login_cli

            return (login_cli.main if arg == "login" else login_cli.logout_main)(args, config_path)
        elif arg in ("run", "lsp"):  # `agent-server --config X run …` means `agent-server run --config X …`
            return main([arg, *(["--config", config_path] if config_path else []), *args], own_process=own)
        else:
            sys.stderr.write(f"agent-server: unknown argument {arg!r}\n\n{_USAGE}")
            return 2
    if (as_json or probe) and not check_config:
        sys.stderr.write(f"agent-server: --json and --probe go with --check-config\n\n{_USAGE}")
        return 2
    if check_config:
        return _check_config(config_path, as_json=as_json, probe=probe)
    from agent_server.cli.serve import _serve

    return _serve(config_path)


def _check_config(config_path: str | None, *, as_json: bool = False, probe: bool = False) -> int:
    """``--check-config`` (``:checkhealth agent_server`` runs it): load the configuration, say how it went.

    ``as_json``: one JSON object on stdout for an editor's first-run page — the endpoint and model in
    use and where the key comes from (a variable or file name, ``keyring``, or ``null``), never the key —
    and the ``configOptions`` a new session starts with (``mode``, ``model``: the pickers before the first prompt).
    ``probe``: also the endpoint's answer to ``login``'s check (``check_key``), exit 1 when it fails.
    """
    import json

    from agent_server.config.load import ConfigError, load_config

    try:
        config = load_config(config_path)
    except ConfigError as exc:
        if as_json:
            sys.stdout.write(json.dumps({"ok": False, "error": str(exc)}) + "\n")
        sys.stderr.write(f"agent-server: configuration error: {exc}\n")
        return 1
    reached = None
    if probe and config.provider.base_url:
        from agent_server.cli.login import PROBE_TIMEOUT, check_key

        reached = check_key(config.provider.base_url, config.provider.api_key, timeout=PROBE_TIMEOUT)
    status = 1 if reached is not None and not reached.ok else 0
    if as_json:
        p = config.provider
        key_source = p.api_key_source or ("keyring" if p.key_store == "keyring" else None)
        # what a new session will offer (its mode and model pickers), so an editor can show them before one exists
        from agent_server.config.views import mode_option, model_option

        offered = [mode_option(config.policy.default_mode),
                   model_option([(c.id, c.name, c.description) for c in config.models], p.model)]
        sys.stdout.write(json.dumps({
            "ok": True, "source": config.source, "profile": p.profile, "model": p.model, "baseUrl": p.base_url,
            "keyRequired": p.key_required, "keySource": key_source, "keyVariable": p.api_key_env,
            "configOptions": [o for o in offered if o is not None],
            **({"endpoint": {"ok": reached.ok, "message": reached.message}} if reached is not None else {})}) + "\n")
        return status
    sys.stdout.write(f"configuration OK: {config.source or 'no config file (defaults and the environment)'}; "
                     f"profile {config.provider.profile!r}, model {config.provider.model or '(none)'!r}\n")
    if reached is not None:
        (sys.stdout if reached.ok else sys.stderr).write(reached.message + "\n")
    return status
