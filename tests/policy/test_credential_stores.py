"""Credential stores (issue 11 §1 d): config, state, keyrings and the user's credential files are
closed to every file tool in every mode — denied by policy without asking, except this session's
spill and temp folders."""

from __future__ import annotations

import json

import pytest

from agent_server.config.load import PolicySettings
from agent_server.policy.engine import SessionPolicy
from agent_server.policy.modes import DANGER_FULL_ACCESS, ModeState
from agent_server.policy.paths import CREDENTIAL_PATH_VARIABLES, HOME_CREDENTIALS, CredentialStores
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


#: Each credential-path variable's default place (the file its tool reads when the variable is unset);
#: ``None``: the variable has no default place (or, for ``PIP_CONFIG_FILE``, the default file is mostly
#: an index's address, which a confined ``pip install`` needs).
DEFAULT_PLACES = {
    "GOOGLE_APPLICATION_CREDENTIALS": ".config/gcloud/application_default_credentials.json",
    "GOOGLE_GHA_CREDS_PATH": None, "CLOUDSDK_AUTH_CREDENTIAL_FILE_OVERRIDE": None, "CLOUDSDK_CONFIG": ".config/gcloud",
    "AWS_SHARED_CREDENTIALS_FILE": ".aws/credentials", "AWS_CONFIG_FILE": ".aws/config",
    "AWS_WEB_IDENTITY_TOKEN_FILE": None, "KUBECONFIG": ".kube/config", "KUBE_CONFIG_PATH": ".kube/config",
    "DOCKER_CONFIG": ".docker/config.json", "DOCKER_CERT_PATH": None, "AZURE_CONFIG_DIR": ".azure",
    "GNUPGHOME": ".gnupg", "PASSWORD_STORE_DIR": ".password-store", "GH_CONFIG_DIR": ".config/gh",
    "NETRC": ".netrc", "PGPASSFILE": ".pgpass", "PGSERVICEFILE": ".pg_service.conf",
    "MYSQL_TEST_LOGIN_FILE": ".mylogin.cnf", "RCLONE_CONFIG": ".config/rclone/rclone.conf",
    "TF_CLI_CONFIG_FILE": ".terraformrc", "OCI_CLI_CONFIG_FILE": ".oci/config", "BOTO_CONFIG": ".boto",
    "NPM_CONFIG_USERCONFIG": ".npmrc", "PIP_CONFIG_FILE": None, "SOPS_AGE_KEY_FILE": ".config/sops/age/keys.txt",
    "HF_TOKEN_PATH": ".cache/huggingface/token", "KAGGLE_CONFIG_DIR": ".kaggle/kaggle.json", "GIT_SSL_KEY": None,
    "VAULT_CONFIG_PATH": None,
}


def test_pgpassfile_was_refused_while_pgpass_at_its_default_place_was_read():
    """Newcomer 6 finding 1: the README says a credential variable's file is refused because "the same file
    at its default place is already refused" — but ``~/.pgpass`` (``$PGPASSFILE``'s default), ``~/.terraformrc``,
    ``~/.boto``, the Hugging Face and Kaggle tokens … were not. Every variable's default place is a store."""
    assert set(DEFAULT_PLACES) == set(CREDENTIAL_PATH_VARIABLES)  # a new variable: say its default place here
    home = "/home/u"
    s = CredentialStores(state_dir=None, home=home)
    missing = [f"${name} ~/{place}" for name, place in DEFAULT_PLACES.items()
               if place and not s.match(f"{home}/{place}")]
    assert missing == []


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
