"""``agent-server sessions [--cwd DIR] [--json]``: the stored sessions, newest first.

Role: read the headers of the session logs in the state folder (``AGENT_SERVER_STATE_DIR``, else
the platform's user state folder) and print one line per session: id, age, folder, title (the
first line of the first prompt, quoted) and the log's path — what ``run --resume`` and ``replay`` take.
``--json``: one object a line (``sessionId``, ``title``, ``cwd``, ``updatedAt``, ``log``).
Exit status: 0, 2 for bad usage.

Must never: change a log (only headers and the first prompt are read), or stop at an unreadable
log (it is listed as unreadable).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agent-server sessions",
                                     description="List the stored sessions, newest first.")
    parser.add_argument("--cwd", help="only the sessions of this folder")
    parser.add_argument("--json", action="store_true", help="one JSON object per session")
    return parser


def age(seconds: float) -> str:
    """``just now``, ``5 min ago``, ``3 h ago``, ``2 days ago`` for an age in seconds."""
    if seconds < 60:
        return "just now"
    if seconds < 3600:
        return f"{int(seconds // 60)} min ago"
    if seconds < 86400:
        return f"{int(seconds // 3600)} h ago"
    days = int(seconds // 86400)
    return f"{days} day{'s' if days != 1 else ''} ago"


def stored_sessions(state_dir: Path, cwd: str | None = None) -> list[dict[str, Any]]:
    """The sessions under ``state_dir``, newest first: ``{"sessionId", "title", "cwd",
    "updated" (epoch seconds), "log", "error"}`` (``error``: why the log cannot be read, else None)."""
    from agent_server.host.lifecycle import session_title
    from agent_server.session import LogCorruptError, LogVersionError, SessionStore, read_head

    store = SessionStore(state_dir)
    found = []
    for session_id in store.ids():
        path = store.log_path(session_id)
        info: dict[str, Any] = {"sessionId": session_id, "title": None, "cwd": None, "log": str(path), "error": None}
        try:
            info["updated"] = path.stat().st_mtime
            header, first = read_head(path, lambda e: e.type == "user")
            info["cwd"] = header.data.get("cwd")
            info["title"] = session_title(first)
        except (LogCorruptError, LogVersionError, OSError) as exc:
            info.setdefault("updated", 0.0)
            info["error"] = str(exc)
        if cwd is not None and (info["cwd"] is None or os.path.normpath(info["cwd"]) != os.path.normpath(cwd)):
            continue
        found.append(info)
    found.sort(key=lambda i: (i["updated"], i["sessionId"]), reverse=True)
    return found


def main(argv: list[str]) -> int:
    """Run the sub-command on ``argv`` (the arguments after ``sessions``); the exit status."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exc:
        return 2 if exc.code else 0
    from agent_server.session import default_state_dir

    state_dir = default_state_dir()
    cwd = str(Path(args.cwd).resolve()) if args.cwd else None
    sessions = stored_sessions(state_dir, cwd)
    out = sys.stdout
    if args.json:
        for s in sessions:
            updated = datetime.datetime.fromtimestamp(s["updated"], datetime.timezone.utc).isoformat()
            out.write(json.dumps({"sessionId": s["sessionId"], "title": s["title"], "cwd": s["cwd"],
                                  "updatedAt": updated, "log": s["log"], "error": s["error"]},
                                 ensure_ascii=False) + "\n")
        return 0
    if not sessions:
        out.write(f"No stored sessions{f' for {cwd}' if cwd else ''} in {state_dir / 'sessions'}.\n")
        return 0
    now = time.time()
    out.write("SESSION  UPDATED  FOLDER  TITLE  LOG\n")
    for s in sessions:
        title = json.dumps(s["title"], ensure_ascii=False) if s["title"] else (
            "(unreadable log)" if s["error"] else "(no prompt yet)")
        out.write(f"{s['sessionId']}  {age(now - s['updated'])}  {s['cwd'] or '?'}  {title}  {s['log']}\n")
    out.write("\nContinue one with: agent-server run --resume SESSION_ID -p \"…\" --cwd FOLDER;"
              " see its requests with: agent-server replay SESSION_ID\n")
    return 0
