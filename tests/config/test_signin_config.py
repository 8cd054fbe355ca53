"""What `agent-server login` stored, as the configuration sees it: precedence, which profiles need
a key, the file's mode, and no keyring import unless a key really is in the keyring."""

from __future__ import annotations

import json
import stat
import subprocess
import sys

import pytest

from agent_server.config import credentials
from agent_server.config.load import ConfigError, Profile, is_local, key_needed, load_config


@pytest.fixture
def env(tmp_path):
    return {"XDG_CONFIG_HOME": str(tmp_path / "cfg"), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}


def test_profiles_on_this_machine_need_no_key_unless_they_say_so():
    assert is_local("http://127.0.0.1:8080/v1") and is_local("http://localhost:11434/v1") and is_local("http://[::1]:1/v1")
    assert not is_local("https://api.deepseek.com/v1") and not is_local("http://10.0.0.5:8000/v1") and not is_local(None)
    assert key_needed(Profile(base_url="https://x.example/v1"), "https://x.example/v1")
    assert not key_needed(Profile(), "http://127.0.0.1:9/v1")
    assert key_needed(Profile(key_required=True), "http://127.0.0.1:9/v1")
    assert not key_needed(Profile(key_required=False), "https://x.example/v1")


def test_a_stored_file_key_is_used_below_every_variable_and_its_profile_and_model_become_the_defaults(env):
    kind, where = credentials.store("openai", "sk-STORED", model="gpt-stored", env=env, use_keyring=False)
    path = credentials.credentials_path(env)
    assert kind == "file" and str(path) in where and stat.S_IMODE(path.stat().st_mode) == 0o600
    p = load_config(env=env).provider
    assert (p.profile, p.model, p.api_key, p.key_store) == ("openai", "gpt-stored", "sk-STORED", None)
    assert "login" in p.api_key_source and "sk-STORED" not in repr(p)
    over = load_config(env={**env, "OPENAI_API_KEY": "sk-ENV", "AGENT_SERVER_MODEL": "m2"}).provider
    assert (over.api_key, over.api_key_source, over.model) == ("sk-ENV", "OPENAI_API_KEY", "m2")
    assert load_config(env={**env, "AGENT_SERVER_PROFILE": "deepseek"}).provider.api_key is None
    assert credentials.forget("openai", env=env) == ["openai"] and not path.exists()
    assert load_config(env=env).provider.profile == "custom"


def test_a_keyring_key_is_only_noted_at_start_up_and_keyring_is_not_imported(env, tmp_path):
    path = credentials.credentials_path(env)
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"version": 1, "profile": "deepseek",
                                "profiles": {"deepseek": {"key_store": "keyring", "model": "deepseek-chat"}}}))
    code = ("import json, os, sys; from agent_server.config.load import load_config; p = load_config().provider; "
            "print(json.dumps([p.profile, p.api_key, p.key_store, p.key_required, 'keyring' in sys.modules]))")
    out = subprocess.run([sys.executable, "-c", code], env={**env, "PATH": "/usr/bin:/bin"}, capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out) == ["deepseek", None, "keyring", True, False]


def test_a_broken_credentials_file_is_a_config_error_naming_it(env):
    path = credentials.credentials_path(env)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="credentials.json"):
        load_config(env=env)
    assert credentials.forget(None, env=env) == [] and not path.exists()  # logout --all clears it


def test_logout_all_forgets_every_stored_profile(env):
    """``agent-server logout --all`` (``forget(None)``) with profiles stored — one key in the file,
    one in the keyring — removes both records and the file (it once raised ``NameError``)."""
    credentials.store("openai", "sk-STORED", model="gpt-stored", env=env, use_keyring=False)
    path = credentials.credentials_path(env)
    data = json.loads(path.read_text())
    data["profiles"]["deepseek"] = {"key_store": "keyring", "model": "deepseek-chat"}
    path.write_text(json.dumps(data))
    assert sorted(credentials.forget(None, env=env)) == ["deepseek", "openai"] and not path.exists()


def test_check_config_json_names_the_endpoint_model_and_where_the_key_comes_from_never_the_key(env, tmp_path):
    """Issue 30 item 9: the VS Code panel's first-run page shows the endpoint and model in use; it
    reads them from `agent-server --check-config --json` (the key itself never appears)."""
    run = lambda extra, args: subprocess.run(  # noqa: E731
        [sys.executable, "-m", "agent_server", *args], capture_output=True, text=True,
        env={"PATH": "/usr/bin:/bin", **env, **extra}, timeout=60)
    got = run({"AGENT_SERVER_BASE_URL": "https://models.example/v1", "AGENT_SERVER_MODEL": "m-1",
               "AGENT_SERVER_API_KEY": "sk-secret-123"}, ["--check-config", "--json"])
    assert got.returncode == 0, got.stderr
    out = json.loads(got.stdout)
    assert out["ok"] and out["baseUrl"] == "https://models.example/v1" and out["model"] == "m-1"
    assert out["keySource"] == "AGENT_SERVER_API_KEY" and "sk-secret-123" not in got.stdout
    # the pickers before the first prompt: what a new session starts with
    options = {o["id"]: o for o in out["configOptions"]}
    assert options["mode"]["currentValue"] == "workspace-write" and "danger-full-access" in [o["value"] for o in options["mode"]["options"]]
    assert options["model"]["currentValue"] == "m-1"
    nokey = json.loads(run({"AGENT_SERVER_BASE_URL": "https://models.example/v1"}, ["--json", "--check-config"]).stdout)
    assert nokey["keySource"] is None and nokey["model"] is None
    bad = tmp_path / "bad.toml"
    bad.write_text("profile = [\n")
    broken = run({}, ["--check-config", "--json", "--config", str(bad)])
    assert broken.returncode == 1 and json.loads(broken.stdout)["ok"] is False and "bad.toml" in json.loads(broken.stdout)["error"]
    assert run({}, ["--json"]).returncode == 2


async def test_check_config_probe_said_nothing_of_a_refused_key_or_an_endpoint_that_is_not_there(env):
    """Finding 9g's CLI side: ``--check-config --probe`` asks the endpoint as ``agent-server login``
    does (``GET <base_url>/models``): exit 1 with the reason when the key is refused or nothing
    listens, 0 when it answers; the key is never printed."""
    import asyncio
    import socket

    from agent_server.offline import OfflineEndpoint

    async def probe(base_url: str, key: str):
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "agent_server", "--check-config", "--json", "--probe",
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            env={"PATH": "/usr/bin:/bin", **env, "AGENT_SERVER_BASE_URL": base_url, "AGENT_SERVER_MODEL": "m",
                 "AGENT_SERVER_API_KEY": key})
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert key not in out.decode() + err.decode()
        return proc.returncode, json.loads(out)["endpoint"]

    async with OfflineEndpoint(api_key="sk-right-123") as ep:
        assert await probe(ep.base_url, "sk-right-123") == (0, {
            "ok": True, "message": f"The endpoint accepted the key ({ep.base_url}/models: HTTP 200)."})
        code, refused = await probe(ep.base_url, "sk-wrong-456")
        assert code == 1 and not refused["ok"] and "refused this key (HTTP 401" in refused["message"], refused
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    code, gone = await probe(closed, "sk-any-789")
    assert code == 1 and not gone["ok"] and f"cannot reach {closed}/models" in gone["message"], gone


def test_check_config_probe_of_a_base_url_without_v1_said_only_http_404():
    """Review of the last session (and newcomer 6 finding 5's kin): ``--check-config --probe`` and
    ``agent-server login`` against ``http://HOST:PORT`` of a server that serves ``/v1/...`` only said
    "answered HTTP 404": the usual cause — the base URL without its ``/v1`` — is said, with the URL to try."""
    import http.server
    import threading

    from agent_server.cli.login import check_key

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            self.send_response(404)
            self.send_header("Content-Length", "9")
            self.end_headers()
            self.wfile.write(b"Not Found")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        root = f"http://127.0.0.1:{server.server_address[1]}"
        got = check_key(root, "sk-any")
        assert not got.ok and "HTTP 404" in got.message and f"try {root}/v1" in got.message, got.message
        versioned = check_key(root + "/v1", "sk-any")  # the root has its /v1: no such hint
        assert not versioned.ok and "HTTP 404" in versioned.message and "try" not in versioned.message, versioned.message
    finally:
        server.shutdown()
        server.server_close()
