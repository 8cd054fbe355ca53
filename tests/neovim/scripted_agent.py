"""A small scripted ACP agent (raw NDJSON, no SDK) for the Neovim plugin's client-only behaviour.

Run as ``python scripted_agent.py``. It answers ``initialize``, ``session/new`` and
``session/prompt``; the prompt's text picks what happens:

* ``flood N``  – N ``agent_message_chunk`` updates of one character each (the text of
  :func:`flood_text`), written as fast as the pipe takes them, then ``end_turn``
* ``garbage``  – a line that is not JSON and a JSON array on stdout, then a chunk and ``end_turn``
* ``huge N``   – one ``agent_message_chunk`` of N characters (``x``), then ``end_turn``
* ``closeout`` – one chunk, then stdout is closed while the process goes on running (a broken stream)
* ``die``      – a line on stderr, one chunk, then the process exits (status 3) mid-turn
* ``read PATH`` – ``fs/read_text_file``; the result is echoed back as JSON in one chunk
* ``propose DELTA HASH PATH`` – reads PATH, then proposes inserting ``X`` at its start with
  ``version`` = the version read + DELTA (``null`` for DELTA ``null``) and ``baseHashes`` = the sha256
  of the text read (HASH ``ok``) or a wrong one (HASH ``bad``); the answer is echoed as JSON
* ``permit N`` – N ``session/request_permission`` requests, one after the other, about one tool call
  (``call_q``, "Run the tests") the agent never sent a ``tool_call`` for (ACP allows it); then one
  chunk with the outcomes
* ``write PATH TEXT`` – ``fs/write_text_file`` with TEXT (``\\n``, ``\\r`` become line breaks); the result is echoed
* ``hold``     – one chunk (``part one ``), and the turn stays open: the next prompt, a slash command
  (``/name``), gets the turn's next chunk first (``part two ``, no ``messageId`` as ever), then its
  reply (``messageId`` ``cmd-1``, as agent-server sends it) and its answer; then the turn sends
  ``part three`` and ends
* anything else – echoed back as one chunk, ``end_turn``
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path


def flood_text(n: int) -> str:
    """The deterministic text of ``flood N``: numbered lines, ``n`` characters in all."""
    out, i = [], 0
    while sum(len(s) for s in out) < n:
        out.append(f"line {i:06d} of the flood, one character per chunk\n")
        i += 1
    return "".join(out)[:n]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")


def chunk(session_id: str, text: str, message_id: str | None = None) -> dict:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    if message_id is not None:
        update["messageId"] = message_id
    return {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}}


def ask(method: str, params: dict) -> dict:
    """Send a request to the client and read until its response (other lines are dropped)."""
    ask.next_id = getattr(ask, "next_id", 100) + 1
    send({"jsonrpc": "2.0", "id": ask.next_id, "method": method, "params": params})
    sys.stdout.flush()
    for line in sys.stdin:
        msg = json.loads(line)
        if msg.get("id") == ask.next_id and "method" not in msg:
            return msg
    raise SystemExit(0)


def main() -> None:
    held = None  # the id of the prompt ``hold`` left open
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid, params = msg.get("method"), msg.get("id"), msg.get("params") or {}
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": 1, "agentCapabilities": {"promptCapabilities": {"embeddedContext": True}},
                "agentInfo": {"name": "scripted-agent", "version": "0.0.1"}, "authMethods": []}})
        elif method == "session/new":
            send({"jsonrpc": "2.0", "id": rid, "result": {"sessionId": "scripted-1"}})
        elif method == "session/prompt":
            sid = params.get("sessionId")
            text = "".join(b.get("text", "") for b in params.get("prompt", []) if b.get("type") == "text")
            command, _, rest = text.partition(" ")
            if command == "hold":
                send(chunk(sid, "part one "))
                held = rid
                sys.stdout.flush()
                continue
            if held is not None and command.startswith("/"):
                send(chunk(sid, "part two "))
                send(chunk(sid, "the reply to " + command, "cmd-1"))
                send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
                send(chunk(sid, "part three"))
                rid, held = held, None
            elif command == "flood":
                for ch in flood_text(int(rest)):
                    send(chunk(sid, ch))
            elif command == "garbage":
                sys.stdout.write("this line is not JSON\n")
                sys.stdout.write("[1, 2, 3]\n")
                send(chunk(sid, "still alive after garbage"))
            elif command == "read":
                answer = ask("fs/read_text_file", {"sessionId": sid, "path": rest})
                send(chunk(sid, "read: " + json.dumps(answer.get("result", answer), sort_keys=True)))
            elif command == "propose":
                delta, hash_mode, path = rest.split(" ", 2)
                read = ask("fs/read_text_file", {"sessionId": sid, "path": path})["result"]
                version = read["_meta"]["agentServer"]["version"]
                digest = hashlib.sha256(read["content"].encode()).hexdigest() if hash_mode == "ok" else "0" * 64
                uri = Path(path).as_uri()
                answer = ask("_agent_server/apply_workspace_edit", {
                    "sessionId": sid, "toolCallId": "call_p", "label": "Edit " + Path(path).name, "save": "if-clean",
                    "edit": {"documentChanges": [{
                        "textDocument": {"uri": uri, "version": None if delta == "null" else version + int(delta)},
                        "edits": [{"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
                                   "newText": "X"}]}]},
                    "baseHashes": {uri: digest}})
                send(chunk(sid, "proposal: " + json.dumps(answer.get("result", answer), sort_keys=True)))
            elif command == "permit":
                outcomes = []
                for n in range(int(rest)):
                    answer = ask("session/request_permission", {
                        "sessionId": sid, "toolCall": {"toolCallId": "call_q", "title": "Run the tests",
                                                       "kind": "execute", "rawInput": {"command": f"make test{n}"}},
                        "options": [{"optionId": "allow", "name": "Allow", "kind": "allow_once"},
                                    {"optionId": "deny", "name": "Deny", "kind": "reject_once"}]})
                    outcomes.append(answer.get("result", {}).get("outcome", {}).get("optionId", "?"))
                send(chunk(sid, "outcomes: " + " ".join(outcomes)))
            elif command == "write":
                path, _, content = rest.partition(" ")
                answer = ask("fs/write_text_file", {"sessionId": sid, "path": path,
                                                    "content": content.replace("\\r", "\r").replace("\\n", "\n")})
                send(chunk(sid, "write: " + json.dumps(answer.get("result", answer), sort_keys=True)))
            elif command == "huge":
                send(chunk(sid, "x" * int(rest)))
            elif command == "closeout":
                send(chunk(sid, "closing my output"))
                sys.stdout.flush()
                os.close(1)
                import time
                time.sleep(60)
                os._exit(0)
            elif command == "die":
                send(chunk(sid, "about to die"))
                sys.stdout.flush()
                sys.stderr.write("scripted crash: the agent dies mid-turn\n")
                sys.stderr.flush()
                os._exit(3)
            else:
                send(chunk(sid, "echo: " + text))
            send({"jsonrpc": "2.0", "id": rid, "result": {"stopReason": "end_turn"}})
        elif rid is not None and method is not None:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found"}})
        sys.stdout.flush()


if __name__ == "__main__":
    main()
