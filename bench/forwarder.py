#!/usr/bin/env python3
"""The floor: a stdlib-only ACP agent that forwards a prompt to the model and back, ~100 lines.

It answers ``initialize`` and ``session/new``, sends each prompt's text to the endpoint
(``AGENT_SERVER_BASE_URL``, ``AGENT_SERVER_MODEL``) with ``http.client``, forwards every content
delta as an ``agent_message_chunk``, runs ``read`` tool calls (plain ``open()``), and asks again
until the model stops. No log, no policy, no validation: what any agent must at least spend.
"""

import http.client
import json
import os
import sys
from urllib.parse import urlsplit

URL = urlsplit(os.environ.get("AGENT_SERVER_BASE_URL", "http://127.0.0.1:9/v1"))
MODEL = os.environ.get("AGENT_SERVER_MODEL", "m")
TOOLS = [{"type": "function", "function": {"name": "read", "description": "read a file",
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}]


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def update(session_id, update):
    send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": session_id, "update": update}})


def complete(messages, session_id):
    conn = http.client.HTTPConnection(URL.hostname, URL.port)
    body = json.dumps({"model": MODEL, "messages": messages, "tools": TOOLS, "stream": True})
    conn.request("POST", URL.path.rstrip("/") + "/chat/completions", body, {"Content-Type": "application/json"})
    text, calls = "", {}
    for raw in conn.getresponse():
        line = raw.decode().strip()
        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
            continue
        for choice in json.loads(line[5:]).get("choices", []):
            delta = choice.get("delta", {})
            if delta.get("content"):
                text += delta["content"]
                update(session_id, {"sessionUpdate": "agent_message_chunk",
                                    "content": {"type": "text", "text": delta["content"]}})
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call.get("index", 0), {"id": "", "name": "", "arguments": ""})
                slot["id"] = call.get("id") or slot["id"]
                fn = call.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                slot["arguments"] += fn.get("arguments") or ""
    conn.close()
    return text, [calls[i] for i in sorted(calls)]


def prompt(params, cwd):
    session_id = params["sessionId"]
    text = "".join(b.get("text", "") for b in params["prompt"] if b.get("type") == "text")
    messages = [{"role": "user", "content": text}]
    while True:
        answer, calls = complete(messages, session_id)
        if not calls:
            return {"stopReason": "end_turn"}
        messages.append({"role": "assistant", "content": answer or None, "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls]})
        for c in calls:
            update(session_id, {"sessionUpdate": "tool_call", "toolCallId": c["id"], "title": c["name"],
                                "kind": "read", "status": "pending"})
            try:
                with open(os.path.join(cwd, json.loads(c["arguments"])["path"]), encoding="utf-8") as fh:
                    result = fh.read()
            except (OSError, ValueError, KeyError) as exc:
                result = f"error: {exc}"
            update(session_id, {"sessionUpdate": "tool_call_update", "toolCallId": c["id"], "status": "completed"})
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": result})


def main():
    cwds = {}
    for line in sys.stdin:
        message = json.loads(line)
        method, params, mid = message.get("method"), message.get("params") or {}, message.get("id")
        if method == "initialize":
            result = {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}
        elif method == "session/new":
            session_id = f"fwd-{len(cwds) + 1}"
            cwds[session_id] = params.get("cwd", ".")
            result = {"sessionId": session_id}
        elif method == "session/prompt":
            result = prompt(params, cwds.get(params.get("sessionId"), "."))
        elif mid is None:
            continue
        else:
            send({"jsonrpc": "2.0", "id": mid, "error": {"code": -32601, "message": "method not found"}})
            continue
        send({"jsonrpc": "2.0", "id": mid, "result": result})


if __name__ == "__main__":
    main()
