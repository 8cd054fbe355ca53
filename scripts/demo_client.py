"""The demo: an ACP client (the official Python SDK) drives ``agent-server`` on a small real task.

The task: a fresh copy of a tiny project whose tests fail (``agent_server/offline/demo_task.py``);
the agent reads the code, runs the tests, fixes the bug with an edit, and runs them again — real
tool calls in a real workspace. With a model configured (``AGENT_SERVER_API_KEY`` +
``AGENT_SERVER_BASE_URL``, ``DEEPSEEK_API_KEY``, ``OPENAI_API_KEY``, a config file, ``agent-server
login`` …) the model does the work. Without one the bundled OFFLINE endpoint plays the model's side from a script —
not a model — and the demo says so.

Usage: python scripts/demo_client.py [--prompt TEXT] [--cwd DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import acp
from acp import text_block

from agent_server.offline.demo_task import DEMO_TASK_PROMPT, demo_task_script, write_project

ROOT = Path(__file__).resolve().parents[1]


class DemoClient(acp.Client):
    """Prints the streamed answer; refuses every permission (the demo runs no risky tool)."""

    def __init__(self):
        self.last_kind = None
        self.titles = {}

    async def session_update(self, session_id, update, **kwargs):
        kind = getattr(update, "session_update", None)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(update.content, "text", "")
            if kind != self.last_kind:
                sys.stdout.write("\n[thinking] " if kind == "agent_thought_chunk" else "\n[answer] ")
            if kind == "agent_thought_chunk" and sys.stdout.isatty():
                text = f"\x1b[2m{text}\x1b[0m"
            sys.stdout.write(text)
        elif kind == "tool_call":
            self.titles[update.tool_call_id] = update.title
            sys.stdout.write(f"\n[tool] {update.title} …")
        elif kind == "tool_call_update" and update.status in ("completed", "failed"):
            title = self.titles.get(update.tool_call_id, update.tool_call_id)
            first = ""
            for item in update.content or []:
                text = getattr(getattr(item, "content", None), "text", None)
                if text:
                    first = text.strip().splitlines()[0][:100] if text.strip() else ""
                    break
            sys.stdout.write(f"\n[tool] {title}: {update.status}" + (f" — {first}" if first else ""))
        sys.stdout.flush()
        self.last_kind = kind

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        return {"outcome": {"outcome": "cancelled"}}


def _configured_provider():
    """agent-server's own provider setting (environment + config file), or ``None`` when it does
    not name a usable model."""
    from agent_server.config.load import ConfigError, load_config

    try:
        provider = load_config().provider
    except ConfigError as exc:
        raise SystemExit(f"demo: agent-server's configuration is invalid: {exc}")
    usable = provider.base_url and provider.model and (provider.api_key or provider.key_store or not provider.key_required)
    return provider if usable else None


def _start_offline_endpoint(state: Path) -> tuple[subprocess.Popen, str]:
    script = state / "offline-demo-task-script.json"
    script.write_text(json.dumps({"description": "agent-server offline demo: scripted model answers "
                                  "for the demo task (NOT a model)", "responses": demo_task_script()}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_server.offline", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE, text=True,
    )
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit("could not start the offline endpoint")
    return proc, url


async def run(prompt: str, cwd: str, env: dict[str, str]) -> str:
    async with acp.spawn_agent_process(DemoClient(), sys.executable, "-m", "agent_server", env=env) as (conn, proc):
        await conn.initialize(protocol_version=1, client_capabilities=None)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        print(f"session {session.session_id}\n")
        response = await conn.prompt(session_id=session.session_id, prompt=[text_block(prompt)])
        print(f"\n\nstopReason: {response.stop_reason}")
        return session.session_id


def fresh_workspace(state: Path) -> Path:
    """A new folder ``state/workspace-<date>-<time>-<random>`` holding the demo project (its tests
    fail); made by ``mkdtemp``, so two demos started in the same second never share one."""
    folder = tempfile.mkdtemp(prefix=f"workspace-{time.strftime('%Y%m%d-%H%M%S')}-", dir=state)
    return write_project(Path(folder))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", default=DEMO_TASK_PROMPT)
    parser.add_argument("--cwd", help="workspace to work in (default: a fresh copy of the demo project)")
    args = parser.parse_args()
    env = dict(os.environ)
    state = Path(env.setdefault("AGENT_SERVER_STATE_DIR", str(ROOT / ".demo-state")))
    state.mkdir(parents=True, exist_ok=True)
    if args.cwd is None:
        args.cwd = str(fresh_workspace(state))
        print(f"workspace: {args.cwd} (a fresh copy of the demo project; its tests fail)")
    print(f"prompt: {args.prompt}")
    endpoint = None
    provider = _configured_provider()
    if provider is not None:
        from agent_server.config.load import redact_url

        print(f"endpoint: {redact_url(provider.base_url)} (profile {provider.profile}, key from "
              f"{provider.api_key_source or 'nowhere: none needed'})")
        print(f"model: {provider.model}")
    else:
        endpoint, url = _start_offline_endpoint(state)
        print(f"endpoint: {url} (the bundled offline endpoint: a script, not a model)")
        print("model: offline-demo")
        env.update(AGENT_SERVER_BASE_URL=url, AGENT_SERVER_MODEL="offline-demo", AGENT_SERVER_PROFILE="custom")
        print("=" * 72)
        print("OFFLINE DEMO: no model is configured, so agent-server talks to the bundled")
        print(f"offline endpoint at {url}, which plays the model's side from a script.")
        print("It is NOT a model: its answers are fixed in advance. The tool calls (read, run")
        print("tests, edit) really run in the workspace. Set AGENT_SERVER_API_KEY (and _BASE_URL/")
        print("_MODEL) or DEEPSEEK_API_KEY / OPENAI_API_KEY, or run `agent-server login`, to let a")
        print("real model do the task.")
        print("=" * 72)
    try:
        session_id = asyncio.run(run(args.prompt, os.path.abspath(args.cwd), env))
    finally:
        if endpoint is not None:
            endpoint.kill()
    print(f"session log: {state / 'sessions' / session_id / 'events.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
