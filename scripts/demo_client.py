"""The demo: an ACP client (the official Python SDK) driving ``agent-server`` on one prompt.

With a model configured (``AGENT_SERVER_API_KEY``/``AGENT_SERVER_BASE_URL``, ``DEEPSEEK_API_KEY``,
``OPENAI_API_KEY`` …) it talks to that provider. Without one it starts the bundled OFFLINE
endpoint, which plays a recorded script — not a model — and says so.

Usage: python scripts/demo_client.py [--prompt TEXT] [--cwd DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import acp
from acp import text_block

OFFLINE_SCRIPT = Path(__file__).resolve().parents[1] / "agent_server" / "offline" / "scripts" / "demo.json"
DEFAULT_PROMPT = "Say hello and tell me what you are."


class DemoClient(acp.Client):
    """Prints the streamed answer; refuses every permission (the demo runs no risky tool)."""

    async def session_update(self, session_id, update, **kwargs):
        kind = getattr(update, "session_update", None)
        if kind in ("agent_message_chunk", "agent_thought_chunk"):
            text = getattr(update.content, "text", "")
            if kind == "agent_thought_chunk":
                text = f"\x1b[2m{text}\x1b[0m" if sys.stdout.isatty() else text
            sys.stdout.write(text)
            sys.stdout.flush()
        elif kind == "tool_call":
            print(f"\n[tool] {update.title} ({update.status})")
        elif kind == "tool_call_update":
            print(f"[tool] {update.tool_call_id}: {update.status}")

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        return {"outcome": {"outcome": "cancelled"}}


def _has_model_configured() -> bool:
    keys = ("AGENT_SERVER_API_KEY", "AGENT_SERVER_BASE_URL", "DEEPSEEK_API_KEY", "OPENAI_API_KEY",
            "AGENT_SERVER_PROFILE", "AGENT_SERVER_CONFIG")
    return any(os.environ.get(k) for k in keys)


def _start_offline_endpoint() -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "agent_server.offline", "--port", "0", "--script", str(OFFLINE_SCRIPT)],
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--cwd", default=os.getcwd())
    args = parser.parse_args()
    env = dict(os.environ)
    state = env.setdefault("AGENT_SERVER_STATE_DIR", tempfile.mkdtemp(prefix="agent-server-demo-"))
    endpoint = None
    if not _has_model_configured():
        endpoint, url = _start_offline_endpoint()
        env.update(AGENT_SERVER_BASE_URL=url, AGENT_SERVER_MODEL="offline-demo", AGENT_SERVER_PROFILE="custom")
        print("=" * 72)
        print("OFFLINE DEMO: no model is configured, so agent-server talks to the bundled")
        print(f"offline endpoint at {url}, which plays a recorded script.")
        print("It is NOT a model. Set AGENT_SERVER_API_KEY (and _BASE_URL/_MODEL) or")
        print("DEEPSEEK_API_KEY / OPENAI_API_KEY to use a real provider.")
        print("=" * 72)
    try:
        session_id = asyncio.run(run(args.prompt, os.path.abspath(args.cwd), env))
    finally:
        if endpoint is not None:
            endpoint.kill()
    print(f"session log: {Path(state) / 'sessions' / session_id / 'events.jsonl'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
