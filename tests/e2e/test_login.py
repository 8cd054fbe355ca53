"""Sign-in (issue 17 §3): ``agent-server login`` in a pseudo-terminal against the offline endpoint
(which, like a provider, answers 401 to any other key), the ``authMethods`` entry, the
auth-required error of ``session/new``, ``authenticate``, ``logout`` — and the stored key stays out
of the model's reach (scripted model: ``read``, ``grep``, the shell)."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pexpect
import pytest

from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.session.store import SessionStore
from support.acp_schema import load_schema

KEY = "sk-LOGIN-0123456789abcdef"
FAIL_KEYRING = "keyring.backends.fail.Keyring"
FILE_KEYRING = "keyrings.alt.file.PlaintextKeyring"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A HOME of its own (config, data and keyring folders under it)."""
    path = tmp_path / "home"
    (path / ".config" / "agent-server").mkdir(parents=True)
    return path


def signin_env(home: Path, state: Path, base_url: str, keyring_backend: str) -> dict[str, str]:
    """An environment with no key anywhere, a config naming the profile ``remote`` (the offline
    endpoint, a key required) and a chosen keyring back-end."""
    (home / ".config" / "agent-server" / "config.toml").write_text(
        f'[profiles.remote]\nbase_url = "{base_url}"\nkey_required = true\n', encoding="utf-8")
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AGENT_SERVER_", "OPENAI_", "DEEPSEEK_", "XDG_", "PYTHON_KEYRING"))}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"),
               AGENT_SERVER_STATE_DIR=str(state), PYTHON_KEYRING_BACKEND=keyring_backend,
               AGENT_SERVER_BASE_URL="", AGENT_SERVER_API_KEY="", AGENT_SERVER_MODEL="")  # over the fixtures' own
    return env


def run_login(agent_command: list[str], env: dict[str, str], key: str, *, model: str = "offline-model",
              confirm: str | None = None, argv: list[str] | None = None) -> tuple[int, str]:
    """Drive ``agent-server login`` (or the command line ``argv``) in a pseudo-terminal: profile
    ``remote``, ``key``, ``model`` (and ``confirm`` when the check fails). Returns ``(exit status,
    transcript)``."""
    argv = argv or [*agent_command, "login"]
    child = pexpect.spawn(argv[0], argv[1:], env=env, encoding="utf-8", timeout=30)
    child.logfile_read = seen = io.StringIO()
    try:
        child.expect(r"Provider \[")
        child.sendline("remote")
        child.expect("API key for remote")
        child.sendline(key)
        if confirm is not None:
            child.expect(r"Store it anyway\? \[y/N\]")
            child.sendline(confirm)
        if confirm in (None, "y"):
            child.expect(r"Model( \[[^]]*\])?: ")
            child.sendline(model)
        child.expect(pexpect.EOF)
    finally:
        child.close()
    return child.exitstatus, seen.getvalue()


def credentials_file(home: Path) -> Path:
    return home / ".config" / "agent-server" / "credentials.json"


def chat_requests(endpoint):
    return [r for r in endpoint.requests if r.path.endswith("/chat/completions")]


def test_login_in_a_terminal_stores_a_key_the_next_session_new_uses(
        agent_command, raw_agent_factory, home, agent_state_dir, workspace):
    with OfflineEndpoint.start_in_thread([text_stream("signed in fine")], api_key=KEY) as ep:
        env = signin_env(home, agent_state_dir, ep.base_url, FAIL_KEYRING)
        status, transcript = run_login(agent_command, env, KEY)
        assert status == 0, transcript
        assert KEY not in transcript  # never echoed
        stored = credentials_file(home)
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600
        assert json.loads(stored.read_text())["profiles"]["remote"] == {
            "model": "offline-model", "key_store": "file", "api_key": KEY}
        (check,) = ep.requests  # the one small request of the check: GET /models with the key
        assert check.path.endswith("/models") and check.headers["authorization"] == f"Bearer {KEY}"

        agent = raw_agent_factory(env=env, inherit_env=False)
        init = agent.request("initialize", {"protocolVersion": 1, "clientCapabilities": {"auth": {"terminal": True}}})
        load_schema().check("InitializeResponse", init["result"])
        assert init["result"]["authMethods"] == [{
            "id": "agent-server-login", "name": "Sign in with an API key", "type": "terminal", "args": ["login"],
            "description": init["result"]["authMethods"][0]["description"]}]
        assert agent.request("authenticate", {"methodId": "agent-server-login"})["result"] == {}
        sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
                               timeout=60)
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer
        (request,) = chat_requests(ep)
        assert request.headers["authorization"] == f"Bearer {KEY}" and request.json()["model"] == "offline-model"
        assert init["result"]["agentCapabilities"]["auth"] == {"logout": {}}
        assert agent.request("logout", {})["result"] == {}  # ACP logout: the stored sign-in goes
        assert not credentials_file(home).exists()


def test_a_profile_that_needs_a_key_and_has_none_gets_auth_required_on_session_new_load_and_resume(
        raw_agent_factory, home, agent_state_dir, workspace):
    env = signin_env(home, agent_state_dir, "http://127.0.0.1:9/v1", FAIL_KEYRING)
    (home / ".config" / "agent-server" / "config.toml").write_text(
        'profile = "remote"\n[profiles.remote]\nbase_url = "https://models.example.invalid/v1"\nmodel = "m"\n')
    # a stored session to load and resume (an unknown one is answered "unknown session" first)
    _, stored = SessionStore(agent_state_dir).create(
        {"cwd": str(workspace), "additional_directories": [], "mcp_servers": []}, session_id="sess_x")
    stored.close()
    agent = raw_agent_factory(env=env, inherit_env=False)
    init = agent.request("initialize", {"protocolVersion": 1})["result"]
    load_schema().check("InitializeResponse", init)
    (method,) = init["authMethods"]  # a client without terminal auth gets the agent-type entry
    assert "type" not in method and "agent-server login" in method["description"]
    answers = [agent.request("session/new", {"cwd": str(workspace), "mcpServers": []}),
               agent.request("session/load", {"sessionId": "sess_x", "cwd": str(workspace), "mcpServers": []}),
               agent.request("session/resume", {"sessionId": "sess_x", "cwd": str(workspace)}),
               agent.request("authenticate", {"methodId": "agent-server-login"})]
    for answer in answers:
        error = answer["error"]
        assert error["code"] == -32000 and "Authentication required" in error["message"], answer
        assert "agent-server login" in error["message"] and error["data"]["profile"] == "remote"
    assert [p.name for p in (agent_state_dir / "sessions").iterdir()] == ["sess_x"]  # session/new made none
    assert agent.request("authenticate", {"methodId": "other"})["error"]["code"] == -32602


def test_a_login_made_while_the_server_runs_is_picked_up_by_the_next_session_new(
        agent_command, raw_agent_factory, home, agent_state_dir, workspace):
    """The ACP terminal-auth flow: the editor got -32000, ran `agent-server login` in a terminal,
    then asks again on the same server process."""
    with OfflineEndpoint.start_in_thread([text_stream("hello")], api_key=KEY) as ep:
        env = signin_env(home, agent_state_dir, ep.base_url, FILE_KEYRING)
        elsewhere = home / "work-config.toml"  # not the default file: `--config` must reach the login
        elsewhere.write_text(f'profile = "remote"\n[profiles.remote]\nbase_url = "{ep.base_url}"\nkey_required = true\n')
        (home / ".config" / "agent-server" / "config.toml").unlink()
        agent = raw_agent_factory([*agent_command, "--config", str(elsewhere)], env=env, inherit_env=False)
        init = agent.request("initialize", {"protocolVersion": 1,
                                            "clientCapabilities": {"_meta": {"terminal-auth": True}}})["result"]
        load_schema().check("InitializeResponse", init)
        legacy = init["authMethods"][0]["_meta"]["terminal-auth"]
        assert legacy["args"] == ["--config", str(elsewhere), "login"] and Path(legacy["command"]).is_absolute()
        assert agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["error"]["code"] == -32000
        status, transcript = run_login(agent_command, env, KEY, argv=[legacy["command"], *legacy["args"]])
        assert status == 0, transcript
        assert "system keyring" in transcript and "api_key" not in credentials_file(home).read_text()
        sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "hi"}]},
                                timeout=60)
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer
        assert chat_requests(ep)[-1].headers["authorization"] == f"Bearer {KEY}"


def test_login_with_a_refused_key_says_so_and_stores_nothing_unless_confirmed(
        agent_command, home, agent_state_dir):
    with OfflineEndpoint.start_in_thread([], api_key=KEY) as ep:
        env = signin_env(home, agent_state_dir, ep.base_url, FAIL_KEYRING)
        status, transcript = run_login(agent_command, env, "sk-WRONG", confirm="n")
        assert status == 1 and "refused this key (HTTP 401" in transcript and "nothing was stored" in transcript
        assert not credentials_file(home).exists()
        status, transcript = run_login(agent_command, env, "sk-WRONG", confirm="y")
        assert status == 0 and json.loads(credentials_file(home).read_text())["profiles"]["remote"]["api_key"] == "sk-WRONG"
    env["AGENT_SERVER_CONFIG"] = str(home / ".config" / "agent-server" / "config.toml")
    status, transcript = run_login(agent_command, env, KEY, confirm="n")  # the endpoint is gone now
    assert status == 1 and "cannot reach" in transcript


@pytest.mark.parametrize("backend", [FAIL_KEYRING, FILE_KEYRING], ids=["file", "keyring"])
def test_the_model_cannot_read_the_stored_key_with_read_grep_or_the_shell_and_logout_removes_it(
        agent_command, raw_agent_factory, home, agent_state_dir, workspace, backend):
    config_dir = home / ".config" / "agent-server"
    keyring_dir = home / ".local" / "share" / "python_keyring"
    steps = [
        [("r1", "read", {"path": str(config_dir / "credentials.json")}),
         ("r2", "read", {"path": str(keyring_dir / "keyring_pass.cfg")}),
         ("g1", "grep", {"pattern": "LOGIN", "path": str(home)}),
         ("g2", "grep", {"pattern": "LOGIN", "path": str(config_dir)})],
        [("b1", "bash", {"command": f"cat {config_dir}/credentials.json {keyring_dir}/keyring_pass.cfg; "
                                    f"grep -rI LOGIN {home} | head -3; echo end"})],
    ]
    script = [tool_call_stream([(i, name, json.dumps(args)) for i, name, args in calls]) for calls in steps]
    with OfflineEndpoint.start_in_thread([*script, text_stream("done")], api_key=KEY) as ep:
        env = signin_env(home, agent_state_dir, ep.base_url, backend)
        status, transcript = run_login(agent_command, env, KEY)
        assert status == 0, transcript
        where = (config_dir / "credentials.json") if backend == FAIL_KEYRING else (keyring_dir / "keyring_pass.cfg")
        assert where.exists()
        # the home folder is searched without a question (a search outside the roots asks)
        agent = raw_agent_factory(env={**env, "AGENT_SERVER_READ_ALLOWED": str(home)}, inherit_env=False)
        agent.request("initialize", {"protocolVersion": 1})
        sid = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["result"]["sessionId"]
        answer = agent.request("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "steal"}]},
                               timeout=120)
        assert answer.get("result", {}).get("stopReason") == "end_turn", answer
        sent = [r.body.decode() for r in chat_requests(ep)]
        results = {m["tool_call_id"]: m["content"] for m in json.loads(sent[-1])["messages"] if m["role"] == "tool"}
    assert all(KEY not in body and "0123456789abcdef" not in body for body in sent)
    # refused, not merely redacted: the key never reached a tool result at all
    assert all("<redacted>" not in text for text in results.values()), results
    assert "configuration" in results["r1"] and "credential store" in results["r2"]
    assert "Permission denied" in results["b1"] and "\nend\n" in results["b1"]  # the command ran to its end
    agent.close()

    logout = pexpect.run(" ".join([*agent_command, "logout"]), env=env, encoding="utf-8", withexitstatus=True)
    assert logout[1] == 0 and "Signed out of remote" in logout[0], logout
    assert not credentials_file(home).exists()
    if backend == FILE_KEYRING:
        assert KEY not in keyring_dir.joinpath("keyring_pass.cfg").read_text()
    agent = raw_agent_factory(env={**env, "AGENT_SERVER_PROFILE": "remote"}, inherit_env=False)
    agent.request("initialize", {"protocolVersion": 1})
    assert agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["error"]["code"] == -32000


def test_nothing_configured_at_all_asks_for_the_sign_in_instead_of_failing_the_first_prompt(
        raw_agent_factory, home, agent_state_dir, workspace):
    """A fresh install started by an editor: no endpoint, no model — before, session/new succeeded
    and the first prompt failed with "no model endpoint configured"; now the editor is told to
    sign in (login asks the provider), and the offline/local profiles are not affected."""
    env = signin_env(home, agent_state_dir, "http://127.0.0.1:9/v1", FAIL_KEYRING)
    (home / ".config" / "agent-server" / "config.toml").unlink()
    agent = raw_agent_factory(env=env, inherit_env=False)
    agent.request("initialize", {"protocolVersion": 1})
    error = agent.request("session/new", {"cwd": str(workspace), "mcpServers": []})["error"]
    assert error["code"] == -32000 and "no model endpoint configured" in error["message"]
    assert "agent-server login" in error["message"]
    local = raw_agent_factory(env={**env, "AGENT_SERVER_BASE_URL": "http://127.0.0.1:9/v1",
                                   "AGENT_SERVER_MODEL": "m"}, inherit_env=False)
    local.request("initialize", {"protocolVersion": 1})
    assert "result" in local.request("session/new", {"cwd": str(workspace), "mcpServers": []})


def test_logout_of_a_misspelt_profile_said_nothing_to_remove_and_exited_0(
        agent_command, home, agent_state_dir):
    """``logout --profile nosuch`` looked like a sign-out that found nothing; the stored key of the
    profile the user meant stayed, unnoticed. Now: an error naming the profiles, exit status 2."""
    import subprocess

    with OfflineEndpoint.start_in_thread([], api_key=KEY) as ep:
        env = signin_env(home, agent_state_dir, ep.base_url, FAIL_KEYRING)
        status, transcript = run_login(agent_command, env, KEY)
        assert status == 0, transcript

    def logout(*args, **extra):
        return subprocess.run([*agent_command, "logout", *args], env={**env, **extra}, capture_output=True,
                              text=True, timeout=60)

    wrong = logout("--profile", "remot")
    assert wrong.returncode == 2 and wrong.stdout == "", wrong
    assert "there is no profile 'remot'" in wrong.stderr and "remote" in wrong.stderr.split("Known profiles:")[1]
    assert "stored sign-ins: remote." in wrong.stderr
    assert "remote" in json.loads(credentials_file(home).read_text())["profiles"]  # nothing was removed
    env_wrong = logout(AGENT_SERVER_PROFILE="remot")  # the profile picked by the environment, misspelt
    assert env_wrong.returncode == 2 and "AGENT_SERVER_PROFILE='remot' is set" in env_wrong.stderr, env_wrong
    unstored = logout("--profile", "openai")  # a known profile with nothing stored: nothing to do, not an error
    assert unstored.returncode == 0 and "No stored sign-in for openai" in unstored.stdout
    right = logout("--profile", "remote")
    assert right.returncode == 0 and "Signed out of remote" in right.stdout
    assert not credentials_file(home).exists()
    gone = logout("--profile", "remote")  # a stored-only profile once removed from the config is still known
    assert gone.returncode == 0 and "No stored sign-in for remote" in gone.stdout


def test_login_with_a_misspelt_agent_server_profile_named_only_the_config(agent_command, home, agent_state_dir):
    import subprocess

    env = signin_env(home, agent_state_dir, "http://127.0.0.1:9/v1", FAIL_KEYRING)
    done = subprocess.run([*agent_command, "login"], env={**env, "AGENT_SERVER_PROFILE": "remot"},
                          capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2 and "unknown profile 'remot'" in done.stderr, done
    assert "AGENT_SERVER_PROFILE='remot' is set in this environment" in done.stderr
