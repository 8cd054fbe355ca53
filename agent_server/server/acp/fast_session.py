"""The CLI's pre-asyncio ``session/new``: the plain case answered before the heavy imports.

Role: right after the CLI's fast path answered ``initialize`` (``cli.serve._fast_initialize``), an
editor sends ``session/new``, which the full server could read only after its imports (asyncio,
pydantic, httpx, ours: bench/README.md). ``fast_new_session(line, out_fd)`` answers it at once
**when it is the plain case** (below), with the standard library only, and exactly as
``AcpServer.new_session`` would — only the ``sessionId`` differs. Anything else returns ``None``
with nothing answered, and the line goes to the full server as before. What it did is handed over
as a ``HandedSession``, which ``serve_stdio`` adopts.

Must never: import anything heavier than the standard library (``tests/server/test_fast_session.py``
pins it), answer a case it does not fully check, or guess what the full server would say.

The plain case:

* the request: ``{"jsonrpc": "2.0", "id": int|str, "method": "session/new", "params": {"cwd": abs,
  "additionalDirectories"?: [abs], "mcpServers"?: [], "_meta"?: object}}``, every root an existing
  directory, no client system prompt (``systemPrompt``, ``_meta.systemPrompt``);
* the configuration (``config_plain``): no config file, or an empty one; an environment that
  resolves (``config.resolve.resolve_provider``) to an endpoint, a model and a key in memory (or a
  profile that needs none): no sign-in to offer, no keyring to open;
* the log: ``logline.create_log`` writes the ``session/header`` line ``EventLog.create`` writes,
  ``fsync``\\ed with its folder, before the answer leaves;
* the answer: ``{"sessionId", "modes", "configOptions"}`` from ``config.views.session_state``.

Anything else: another method, MCP servers, a relative or missing folder, a config file with
settings, a config error, a sign-in needed, a disk that refuses the log. ``serve_stdio`` adopts the
open log (the descriptor itself, holding the one-writer ``flock``: no second lock in this process),
registers the session, starts the sandbox probe and only then sends what follows a ``session/new``
answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Mapping

# imported with this module (standard library only), before the CLI's loader thread starts: the
# fast path then imports nothing while that thread imports the server
from agent_server.config import credentials
from agent_server.config.resolve import BUILTIN_PROFILES, config_text, policy_env, resolve_provider, unusable
from agent_server.session.logline import create_log, default_state_dir, make_store_folders, new_session_id
from agent_server.server.rpc.wire import encode_message, write_all
from agent_server.config.views import DEFAULT_MODE, model_option, session_header, session_state

SLOW_PATH_ENV = "AGENT_SERVER_NO_FAST_SESSION"
"""Set (non-empty) to leave every ``session/new`` to the full server (tests compare the two paths)."""


FAST_NOTE = "agent_server.fast_session: session/new answered before the server loaded:"
"""Said on stderr at ``AGENT_SERVER_LOG_LEVEL=DEBUG`` when the fast path answered (tests look for it)."""


class HandedSession:
    """A session the fast path created and answered, for the full server to adopt.

    ``fd``: the log's descriptor (append mode, holding its ``flock``), owned by the receiver from
    now on; ``line``: the ``session/header`` line written; ``roots``: ``cwd`` then the additional
    directories; ``answer``: the result sent (``sessionId``, ``modes``, ``configOptions``).
    (A plain class: ``dataclasses`` is not imported on the fast path; bench/README.md.)
    """

    def __init__(self, request_id: int | str, session_id: str, path: Path, fd: int, line: bytes,
                 roots: list[str], answer: dict[str, Any]) -> None:
        self.request_id, self.session_id, self.path, self.fd = request_id, session_id, path, fd
        self.line, self.roots, self.answer = line, roots, answer


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def plain_request(line: bytes) -> tuple[int | str, list[str]] | None:
    """``(id, roots)`` of ``line`` when it is a ``session/new`` request of the plain case (absolute
    existing folders, no MCP servers, params the full server accepts), else ``None``."""
    try:
        message = json.loads(line, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return None
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0" and message.get("method") == "session/new"):
        return None
    request_id = message.get("id")
    if type(request_id) not in (int, str):  # no bool, no null: the engine answers those
        return None
    params = message.get("params")
    if not isinstance(params, dict) or params.get("mcpServers", []) != []:
        return None
    if params.get("_meta") is not None and not isinstance(params["_meta"], dict):
        return None
    if params.get("systemPrompt") is not None or (params.get("_meta") or {}).get("systemPrompt") is not None:
        return None  # the client's system prompt is checked and logged by the full server
    cwd, extra = params.get("cwd"), params.get("additionalDirectories", [])
    if not isinstance(extra, list):
        return None
    roots = [cwd, *extra]
    for root in roots:
        if not isinstance(root, str) or "\x00" in root or not os.path.isabs(root):
            return None
        try:
            root.encode("utf-8")  # a lone surrogate: the full server says what is wrong
        except UnicodeEncodeError:
            return None
        if not os.path.isdir(root):
            return None
    return request_id, roots


def config_plain(config_path: str | None, env: Mapping[str, str]) -> dict[str, Any] | None:
    """``{"modes", "configOptions"}`` of a new session when the configuration is the plain case:
    no (or an empty) config file, an environment that ``config.load_config`` accepts for sure,
    and a default provider that is usable without a sign-in (``config.resolve.unusable``); else
    ``None``. Reads the files ``load_config`` reads (credentials, config), with its own functions."""
    try:
        signin = credentials.read(env)
        _, text = config_text(config_path, env)
        if text is not None and text.strip():
            return None  # settings to validate: pydantic's job, in the full server
        profiles = {name: SimpleNamespace(**fields) for name, fields in BUILTIN_PROFILES.items()}
        provider = SimpleNamespace(**resolve_provider({}, profiles, env, signin))
    except Exception:  # ConfigError, CredentialsError, OSError … — or any doubt: the full server decides
        return None
    policy = policy_env(env)
    if policy.get("sandbox", "auto") not in ("auto", "off") or "approval_timeout" in policy:
        return None  # a value PolicySettings validates: not checked twice here
    if unusable(provider):
        return None  # the sign-in rule (-32000, after a fresh read of the config): the full server's
    # with no [[models]], config.load_config lists the default model alone, named by its id
    model = model_option([(provider.model, provider.model, None)], provider.model)
    return session_state(DEFAULT_MODE, model)


def fast_new_session(line: bytes, out_fd: int, config_path: str | None,
                     env: Mapping[str, str] | None = None) -> HandedSession | None:
    """Answer ``line`` on ``out_fd`` if it is a plain-case ``session/new`` (module docstring),
    after its log's header is on disk; return what was done, else ``None`` (nothing answered)."""
    env = os.environ if env is None else env
    if env.get(SLOW_PATH_ENV):
        return None
    request = plain_request(line)
    if request is None:
        return None
    state = config_plain(config_path, env)
    if state is None:
        return None
    request_id, roots = request
    session_id = new_session_id()
    try:
        root = default_state_dir(env) / "sessions"
        make_store_folders(root)
        path = root / session_id / "events.jsonl"
        fd, header_line = create_log(path, {"session_id": session_id, **session_header(roots[0], roots[1:], [])})
    except OSError:
        return None  # the full server tries again and reports what is wrong
    answer = {"sessionId": session_id, **state}
    if env.get("AGENT_SERVER_LOG_LEVEL", "").strip().upper() == "DEBUG":  # logging is not set up yet
        os.write(2, f"agent-server DEBUG {FAST_NOTE} {session_id}\n".encode())
    write_all(out_fd, encode_message({"jsonrpc": "2.0", "id": request_id, "result": answer}))
    return HandedSession(request_id, session_id, path, fd, header_line, roots, answer)
