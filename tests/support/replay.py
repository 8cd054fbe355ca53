"""Replay checks: every model request a test endpoint received is rebuilt, byte for byte, from the
session logs alone by the real ``agent-server replay --json`` command.

Role: ``replay_cli(log)`` runs the command on one log and returns its JSON lines;
``assert_replay_matches(state_dir, requests)`` checks a whole state folder against the requests an
offline endpoint recorded (the e2e ``conftest`` applies it to every end-to-end test).
"""

from __future__ import annotations

import collections
import hashlib
import json
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .fixtures import agent_server_command

CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")


def replay_cli(log: Path, *extra: str) -> list[dict[str, Any]]:
    """``agent-server replay --json LOG [extra…]``: one dict per request (fails the test on a
    non-zero exit, with the command's stderr). Without ``extra``, the lines must also equal the
    pure functions' (``logged_requests``, in this process): the command builds its bodies with the
    session's memo, as the agent does, so the request the endpoint received is checked against the
    functions too, not only against the memo."""
    command = [*agent_server_command(), "replay", "--json", str(log), *extra]
    done = subprocess.run(command, capture_output=True, timeout=60, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, f"{command} exited {done.returncode}: {done.stderr.decode(errors='replace')}"
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    if not extra:
        from agent_server.agent.replay import logged_requests
        from agent_server.session import ImageStore, read_events

        functions = logged_requests(read_events(Path(log)), images=ImageStore(Path(log).parent).resolve)
        assert lines == [r.as_json() for r in functions], f"{log}: memo ≠ functions"
    return lines


def session_logs(state_dir: Path) -> list[Path]:
    """Every ``sessions/*/events.jsonl`` under ``state_dir``."""
    return sorted((Path(state_dir) / "sessions").glob("*/events.jsonl"))


def chat_bodies(requests: Iterable[Any]) -> list[bytes]:
    """Bodies of the chat-completion POSTs among an endpoint's recorded requests, in order."""
    return [r.body for r in requests if r.method == "POST" and r.path in CHAT_PATHS]


def _subsequence(needles: Sequence[str], haystack: Sequence[str]) -> bool:
    it = iter(haystack)
    return all(any(h == n for h in it) for n in needles)


def assert_replay_matches(state_dir: Path, requests: Iterable[Any], *, logs: Sequence[Path] | None = None) -> int:
    """Every chat request in ``requests`` is one that ``agent-server replay`` rebuilds from the logs
    in ``state_dir`` (sha256 equal, each log's requests in the order they arrived), and every
    request replay is sure was sent did arrive. Requests replay marks ``certain: false`` (the
    process died with the step open, or it was cancelled before any answer) may be missing.
    Returns how many requests were matched.
    """
    received = [hashlib.sha256(b).hexdigest() for b in chat_bodies(requests)]
    replayed = {path: replay_cli(path) for path in (logs if logs is not None else session_logs(state_dir))}
    for lines in replayed.values():
        for line in lines:
            assert hashlib.sha256(line["body"].encode("utf-8")).hexdigest() == line["sha256"], line
    certain = collections.Counter(line["sha256"] for ls in replayed.values() for line in ls if line["certain"])
    maybe = collections.Counter(line["sha256"] for ls in replayed.values() for line in ls if not line["certain"])
    got = collections.Counter(received)
    missing = certain - got
    assert not missing, (f"replay rebuilt {sum(missing.values())} request(s) the endpoint never received "
                         f"(of {len(received)} received): {dict(missing)}")
    unexplained = (got - certain) - maybe
    assert not unexplained, (f"{sum(unexplained.values())} request(s) the endpoint received are not rebuilt "
                             f"by replay from {list(replayed)}: {dict(unexplained)}")
    for path, lines in replayed.items():
        order = [line["sha256"] for line in lines if line["certain"]]
        assert _subsequence(order, received), f"{path}: replay order differs from arrival order"
    return len(received)
