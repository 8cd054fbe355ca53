"""Credential stores (issue 11 §1 d): config, state, keyrings and the user's credential files are
closed to every file tool in every mode — denied by policy without asking, except this session's
spill and temp folders."""

from __future__ import annotations

import json

import pytest

from agent_server.config.load import PolicySettings
from agent_server.policy.engine import SessionPolicy
from agent_server.policy.modes import DANGER_FULL_ACCESS, ModeState
from agent_server.policy.paths import HOME_CREDENTIALS, CredentialStores
from agent_server.policy.sandbox.confiner import SandboxStatus
from agent_server.session import EventLog
from agent_server.tools import get_tool, validate_args
from agent_server.tools.pipeline import PreparedCall

FULL = SandboxStatus("auto", 7, True, True, True, None)


def stores(tmp_path):
    home = tmp_path / "home"
    return CredentialStores(config=[tmp_path / "conf" / "config.toml", home / ".config" / "agent-server"],
                            state_dir=tmp_path / "state", session_dir=tmp_path / "state" / "sessions" / "s1",
                            home=str(home)), home


def test_credential_stores_cover_config_state_keyrings_and_home_secrets(tmp_path):
    s, home = stores(tmp_path)
    for path in (tmp_path / "conf" / "config.toml", home / ".config" / "agent-server" / "profiles.toml",
                 tmp_path / "state", tmp_path / "state" / "sessions" / "s2" / "events.jsonl",
                 tmp_path / "state" / "sessions" / "s1" / "events.jsonl",
                 home / ".ssh" / "id_rsa", home / ".aws" / "credentials", home / ".netrc",
                 home / ".config" / "gh" / "hosts.yml", home / ".local" / "share" / "keyrings" / "login.keyring",
                 home / ".local" / "share" / "python_keyring" / "keyring_pass.cfg", home / ".docker" / "config.json"):
        assert s.match(path), path
    for path in (tmp_path / "state" / "sessions" / "s1" / "spill" / "out.txt",
                 tmp_path / "state" / "sessions" / "s1" / "tmp" / "scratch", tmp_path / "conf" / "other.toml",
                 home / ".sshrc", home / ".config" / "ghostty", tmp_path / "workspace" / "app.py"):
        assert s.match(path) is None, path
    assert str(home / ".ssh") in s.paths() and len(HOME_CREDENTIALS) >= 10


def test_a_link_to_a_store_is_judged_by_where_it_points(tmp_path):
    s, home = stores(tmp_path)
    (home / ".ssh").mkdir(parents=True)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "keys").symlink_to(home / ".ssh")
    lexical = tmp_path / "ws" / "keys" / "id_rsa"
    assert s.match(lexical) is None and s.match(lexical, lexical.resolve())


def _prepared(name, **args):
    tool = get_tool(name)
    raw = json.dumps(args)
    return PreparedCall(f"c-{name}", f"tc-{name}", name, raw, tool, validate_args(tool, raw))


class NeverAsked:
    async def ask(self, question):
        raise AssertionError(f"asked: {question.title}")


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", DANGER_FULL_ACCESS])
async def test_policy_denies_credential_stores_without_asking_in_every_mode(tmp_path, mode):
    s, home = stores(tmp_path)
    ws = tmp_path / "ws"
    ws.mkdir()
    log = EventLog.create(tmp_path / "log.jsonl", {"cwd": str(ws)})

    async def emit(update):
        pass

    policy = SessionPolicy(log, [ws], PolicySettings(), ModeState(log, mode), NeverAsked(), emit, tmp_path / "tmp",
                           status=FULL)
    policy.protected = s
    for call in (_prepared("read", path=str(home / ".ssh" / "id_rsa")),
                 _prepared("grep", pattern="x", path=str(tmp_path / "state")),
                 _prepared("write", path=str(tmp_path / "conf" / "config.toml"), content="api_key = 'x'"),
                 _prepared("edit", path=str(home / ".netrc"), old_string="a", new_string="b")):
        denial = await policy.guard(call)
        assert denial is not None and "No file tool opens it in any mode" in denial.reason, call.name
    decisions = [e.data for e in log.events if e.type == "policy/decision"]
    assert [d["rule"] for d in decisions] == ["credential-store"] * 4


def test_a_root_inside_a_protected_folder_stays_open_but_a_store_inside_a_root_does_not(tmp_path):
    home = tmp_path / "home"
    demo = tmp_path / "state" / "workspace-1"
    s = CredentialStores(state_dir=tmp_path / "state", home=str(home), roots=[demo, home])
    assert s.match(demo / "calc.py") is None
    assert s.match(tmp_path / "state" / "sessions" / "x" / "events.jsonl")
    assert s.match(home / ".ssh" / "id_rsa")  # the home folder as a root does not open ~/.ssh
