"""``agent-server replay SESSION_ID|SESSION_LOG [--step N] [--json]``: print what the model was sent.

Role: read a session log (without changing it: a live log may be read while the server writes
it), rebuild the exact HTTP body of every model request it accounts for
(``agent.replay.iter_requests``, one at a time) and print them — as a readable listing, as the raw bytes of one
step's body (``--step N``), or as one JSON object a line (``--json``: ``request``, ``step_index``,
``seq``, ``turn``, ``step``, ``attempt``, ``outcome``, ``certain``, ``sha256``, ``bytes``,
``kind`` — ``step`` or ``compaction``, the summarising request of a compaction —, ``valid``,
``problem`` and ``body``). Every rebuilt body is also checked for the invariants a provider enforces
(every tool call answered right after it, no stray result, no empty assistant message).
Exit status: 0, 1 when the log cannot be read, 2 for bad usage, 3 when a rebuilt request breaks an
invariant (everything is still printed; the problems also go to stderr).

Must never: touch the network, read the configuration or the environment (beyond
``AGENT_SERVER_STATE_DIR`` to find a session given by id), or write to the log.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

USAGE = "agent-server replay SESSION_ID|SESSION_LOG [--step N] [--json]"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agent-server replay", usage=USAGE,
        description="Rebuild, from a session log alone, the exact body of every model request it made.")
    parser.add_argument("log", metavar="SESSION_ID|SESSION_LOG",
                        help="a session id (looked up in the state folder, see `agent-server sessions`), "
                             "the session's events.jsonl, or its folder (<state>/sessions/<id>)")
    parser.add_argument("--step", type=int, metavar="N",
                        help="only step N (1-based, counting every step/start of the log; see step_index "
                             "in --json): print its body's exact bytes (with --json: its requests)")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object per request: request, step_index, seq, turn, step, attempt, "
                             "outcome, certain, sha256, bytes, kind, valid, problem, body")
    return parser


def _log_path(given: str) -> Path:
    """The log ``given`` names: a file, a session folder, or — when no such path exists and it is a
    valid id — the session of that id in the state folder (``AGENT_SERVER_STATE_DIR``, else the
    platform's user state folder)."""
    path = Path(given)
    if path.is_dir():
        return path / "events.jsonl"
    if path.exists() or "/" in given:
        return path
    from agent_server.session import SessionStore, default_state_dir

    try:
        return SessionStore(default_state_dir()).log_path(given)
    except ValueError:
        return path


def main(argv: list[str]) -> int:
    """Run the sub-command on ``argv`` (the arguments after ``replay``); returns the exit status.

    The requests are built and written one at a time (``agent.replay.iter_requests``): memory holds
    the log, the memo of its messages and one body; ``--step N`` builds that step's body only."""
    args = _parser().parse_args(argv)
    path = _log_path(args.log)
    from agent_server.agent.replay import iter_requests, request_steps
    from agent_server.agent.request import RequestRebuildError
    from agent_server.session import ImageStore, LogCorruptError, LogVersionError, read_events

    try:
        events = read_events(path)
    except FileNotFoundError:
        sys.stderr.write(f"agent-server replay: no session log at {path}\n")
        return 1
    except (LogCorruptError, LogVersionError) as exc:
        sys.stderr.write(f"agent-server replay: cannot replay {path}: {exc}\n")
        return 1
    out = sys.stdout.buffer
    invalid: list[tuple[int, int, int, str]] = []  # (request, step_index, seq, problem)
    written = 0
    try:
        for request in iter_requests(events, step=args.step, images=ImageStore(path.parent).resolve):
            written += 1
            if request.problem is not None:
                invalid.append((request.index, request.step_index, request.seq, request.problem))
            if args.json:
                out.write(json.dumps(request.as_json(), ensure_ascii=False).encode("utf-8") + b"\n")
            elif args.step is not None:
                if written == 1:
                    out.write(request.body)
            else:
                _write_listed(out, request)
    except (RequestRebuildError, LogCorruptError) as exc:  # LogCorruptError: an event of the wrong shape
        out.flush()
        sys.stderr.write(f"agent-server replay: cannot replay {path}: {exc}\n")
        return 1
    if args.step is not None and not written:
        steps = request_steps(events)
        sys.stderr.write(f"agent-server replay: no step {args.step} in {path} "
                         f"(steps: {min(steps)}–{max(steps)})\n" if steps else
                         f"agent-server replay: {path} has no model request\n")
        return 2
    out.flush()
    for index, step_index, seq, problem in invalid:
        sys.stderr.write(f"agent-server replay: request {index} (step {step_index}, seq "
                         f"{seq}) breaks an invariant: {problem}\n")
    return 3 if invalid else 0


def _write_listed(out: Any, request: Any) -> None:
    """One request of the readable listing: a ``###`` line, then the body's bytes and a newline."""
    what = "compaction after step" if request.kind == "compaction" else "step"
    out.write((f"### request {request.index}: {what} {request.step_index} (turn {request.turn}, "
               f"step {request.step}, attempt {request.attempt}), step/start seq {request.seq}, "
               f"{request.outcome}{'' if request.certain else ' (may not have been sent)'}, "
               f"{len(request.body)} bytes, sha256 {request.sha256}"
               f"{'' if request.problem is None else ', INVALID: ' + request.problem}\n").encode("utf-8"))
    out.write(request.body + b"\n")
