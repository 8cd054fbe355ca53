"""End to end (issue 32 §10): a system keyring that blocks (a Secret Service waiting on an unlock
prompt nobody sees) left ``session/new`` unanswered after 30 s. The key ``agent-server login`` put
in the keyring is read with a timeout (``AGENT_SERVER_KEYRING_TIMEOUT``, default 3 s); then the
request fails with an error naming the keyring, and the server answers on. The keyring is a real
back-end of the ``keyring`` package that never returns (tests/support/blocking_keyring.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.acp_client import AcpHarness

TESTS = Path(__file__).resolve().parents[1]


async def test_a_blocking_keyring_left_session_new_unanswered(agent_command, endpoint, workspace, tmp_path):
    home = tmp_path / "home"
    config = home / ".config" / "agent-server"
    config.mkdir(parents=True)
    (config / "config.toml").write_text(f'[profiles.remote]\nbase_url = "{endpoint.base_url}"\nkey_required = true\n')
    (config / "credentials.json").write_text(json.dumps(
        {"version": 1, "profile": "remote", "profiles": {"remote": {"model": "m", "key_store": "keyring"}}}))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_SERVER_", "OPENAI_", "DEEPSEEK_", "XDG_", "PYTHON_KEYRING"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), AGENT_SERVER_STATE_DIR=str(tmp_path / "state"),
               PYTHON_KEYRING_BACKEND="support.blocking_keyring.Keyring", PYTHONPATH=str(TESTS),
               AGENT_SERVER_KEYRING_TIMEOUT="1", AGENT_SERVER_NO_FAST_SESSION="")
    async with AcpHarness(agent_command, env=env, inherit_env=False) as h:
        await h.initialize()
        try:
            await h.new_session(str(workspace))
        except Exception as exc:  # noqa: BLE001 — the SDK raises the JSON-RPC error
            error = exc
        else:
            raise AssertionError("session/new succeeded without a key")
        text = str(error) + json.dumps(getattr(error, "data", None))
        assert "system keyring (support.blocking_keyring.Keyring) did not answer within 1 s" in text, text
        assert "KEYRING" in text
        assert "sessions" in await h.request("session/list", {})  # the server answers on
