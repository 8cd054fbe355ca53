"""Path policy: resolution (``..``, symlinks at every component, ``/proc/self/root``), containment
by identity, the hard-link limit made visible, and the secret-file patterns."""

from __future__ import annotations

import os

import pytest

from agent_server.policy.paths import SecretMatcher, inside_roots, link_count, target


@pytest.fixture
def tree(tmp_path):
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    return ws, outside


def test_dotdot_escape_is_outside(tree):
    ws, outside = tree
    t = target("../outside/x", [ws])
    assert t.lexical == outside / "x" and not inside_roots(t.lexical, [ws])
    assert not inside_roots(target("src/../../outside/x", [ws]).lexical, [ws])
    assert inside_roots(target("src/../x", [ws]).lexical, [ws])


def test_absolute_outside_and_the_root_itself(tree):
    ws, outside = tree
    assert not inside_roots(target(str(outside / "x"), [ws]).lexical, [ws])
    assert inside_roots(ws, [ws]) and inside_roots(ws / "new" / "deep.txt", [ws])


def test_symlink_inside_pointing_out_is_outside(tree):
    ws, outside = tree
    (ws / "evil").symlink_to(outside / "target.txt")
    t = target("evil", [ws])
    assert t.resolved == outside / "target.txt" and not inside_roots(t.lexical, [ws])


def test_symlinked_parent_directory_is_outside_even_for_a_missing_file(tree):
    ws, outside = tree
    (ws / "src" / "linkdir").symlink_to(outside)
    t = target("src/linkdir/new/file.txt", [ws])
    assert t.resolved == outside / "new" / "file.txt"
    assert not inside_roots(t.lexical, [ws])


def test_symlink_chain_at_an_inner_component_is_followed(tree):
    ws, outside = tree
    (outside / "real").mkdir()
    (ws / "a").symlink_to(ws / "b")
    (ws / "b").symlink_to(outside / "real")
    assert not inside_roots(target("a/x.txt", [ws]).lexical, [ws])


def test_proc_self_root_trick_resolves_to_the_real_path(tree):
    ws, outside = tree
    sneaky = f"/proc/self/root{outside}/x.txt"
    t = target(sneaky, [ws])
    assert t.resolved == outside / "x.txt" and not inside_roots(t.lexical, [ws])
    inside = f"/proc/self/root{ws}/x.txt"
    assert inside_roots(target(inside, [ws]).lexical, [ws])


def test_proc_self_cwd_is_the_servers_cwd_not_the_workspace(tree, monkeypatch):
    ws, outside = tree
    monkeypatch.chdir(outside)
    assert not inside_roots(target("/proc/self/cwd/x.txt", [ws]).lexical, [ws])


def test_root_given_through_a_symlink_still_contains_its_files(tree, tmp_path):
    ws, _ = tree
    alias = tmp_path / "alias"
    alias.symlink_to(ws)
    assert inside_roots(ws / "src" / "f.py", [alias])
    assert inside_roots(alias / "src" / "f.py", [ws])


def test_a_path_under_a_regular_file_is_not_inside(tree):
    ws, _ = tree
    (ws / "file.txt").write_text("x")
    assert not inside_roots(ws / "file.txt" / "child", [ws])


def test_hard_link_is_the_known_limit_and_is_made_visible(tree):
    ws, outside = tree
    (outside / "secret.txt").write_text("outside")
    os.link(outside / "secret.txt", ws / "innocent.txt")
    # the link *is* inside by path: policy cannot know where the other name lives …
    assert inside_roots(ws / "innocent.txt", [ws])
    # … so the link count is recorded with the decision instead
    assert link_count(ws / "innocent.txt") == 2 and link_count(ws / "missing") == 0


@pytest.mark.parametrize("path, pattern", [
    ("/w/.env", ".env*"), ("/w/sub/.env.local", ".env*"), ("{home}/.ssh/id_ed25519", "~/.ssh/**"),
    ("{home}/.ssh", "~/.ssh/**"), ("{home}/.aws/credentials", "~/.aws/**"), ("{home}/.netrc", "~/.netrc"),
    ("/w/certs/server.pem", "*.pem"), ("/tmp/backup_id_rsa.bak", "*id_rsa*"),
])
def test_default_secret_patterns_match(tmp_path, path, pattern):
    home = str(tmp_path / "home")
    assert SecretMatcher(home=home).match(path.format(home=home)) == pattern


@pytest.mark.parametrize("path", ["/w/src/env.py", "/w/.venv/bin/python", "/w/environment.md", "/w/.ssh_notes/x"])
def test_ordinary_files_are_not_secret(tmp_path, path):
    assert SecretMatcher(home=str(tmp_path / "home")).match(path) is None


def test_secret_reached_through_a_symlink_is_found_by_its_resolved_path(tree, tmp_path):
    ws, _ = tree
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("key")
    (ws / "notes.txt").symlink_to(home / ".ssh" / "id_ed25519")
    t = target("notes.txt", [ws])
    assert SecretMatcher(home=str(home)).match(t.lexical, t.resolved) == "~/.ssh/**"


def test_configured_patterns_replace_the_defaults(tmp_path):
    matcher = SecretMatcher(["*.key", "/srv/vault/**"], home=str(tmp_path))
    assert matcher.match("/a/b.key") == "*.key" and matcher.match("/srv/vault/x/y") == "/srv/vault/**"
    assert matcher.match("/w/.env") is None


def test_the_first_secret_match_of_a_process_compiles_no_pattern(monkeypatch, tmp_path):
    """Name patterns were compiled by ``fnmatch`` on the first ``match`` — the first ``read`` of a
    process paid it (≈ 0.2 ms) between its ``tool/call`` and its policy decision."""
    import fnmatch
    import re

    matcher = SecretMatcher(["*.pem", ".env*", "id_[rd]sa?", "~/.ssh/**"], home=str(tmp_path))
    fnmatch._compile_pattern.cache_clear()
    compiled: list[str] = []
    real = re.compile
    monkeypatch.setattr(re, "compile", lambda pattern, *a: compiled.append(pattern) or real(pattern, *a))
    assert matcher.match("/w/server.pem") == "*.pem"
    assert matcher.match("/w/.env.local") == ".env*"
    assert matcher.match("/w/id_rsa1") == "id_[rd]sa?"
    assert matcher.match("/w/id_ecdsa", "/w/notes.txt", "/w/PEM", "/w/x.pem.txt") is None
    assert compiled == []
    for name in ("server.pem", ".env.local", "id_dsaX", "id_rsa", "a.PEM", "x.pem.txt", ".envrc"):  # as fnmatch, any case
        expected = next((p for p in matcher.patterns[:3] if fnmatch.fnmatchcase(name.lower(), p)), None)
        assert matcher.match(f"/w/{name}") == expected, name


@pytest.mark.parametrize("name, pattern", [(".ENV", ".env*"), (".Env.Local", ".env*"), ("SERVER.PEM", "*.pem"),
                                           ("Key.Pem", "*.pem"), ("ID_RSA", "*id_rsa*")])
def test_a_secret_named_in_capitals_was_read_and_searched_without_asking(tmp_path, name, pattern):
    """``.ENV`` and ``KEY.PEM`` did not match ``.env*`` / ``*.pem`` (``fnmatchcase``): read without a
    question and searched by ``grep`` — and on a case-folding filesystem they are ``.env`` itself."""
    assert SecretMatcher(home=str(tmp_path)).match(f"/w/{name}") == pattern


def test_credential_path_variables_name_their_files_and_folders(tmp_path):
    from agent_server.policy.paths import credential_variable_paths

    env = {"GOOGLE_APPLICATION_CREDENTIALS": str(tmp_path / "sa.json"), "KUBECONFIG": f"{tmp_path}/a:{tmp_path}/b",
           "DOCKER_CONFIG": str(tmp_path / "dock"), "MY_API_TOKEN_FILE": str(tmp_path / "t"), "HOME": str(tmp_path),
           "CARGO_HOME": str(tmp_path / "cargo"), "NPM_CONFIG_USERCONFIG": "", "EDITOR": str(tmp_path / "vi"),
           "GIT_SSH_COMMAND": f"ssh -o IdentitiesOnly=yes -i '{tmp_path}/keys/deploy key'"}
    found = dict((label, path) for path, label in credential_variable_paths(env))
    assert found["$GOOGLE_APPLICATION_CREDENTIALS"] == str(tmp_path / "sa.json")
    assert [p for p, label in credential_variable_paths(env) if label == "$KUBECONFIG"] == [f"{tmp_path}/a", f"{tmp_path}/b"]
    assert {"$DOCKER_CONFIG", "$MY_API_TOKEN_FILE", "$CARGO_HOME/credentials.toml"} <= set(found)
    assert "$NPM_CONFIG_USERCONFIG" not in found and "$EDITOR" not in found
    assert found["$GIT_SSH_COMMAND (-i)"] == f"{tmp_path}/keys/deploy key"
    matcher = SecretMatcher(home=str(tmp_path), exact=credential_variable_paths(env))
    assert matcher.match(tmp_path / "dock" / "config.json") == "$DOCKER_CONFIG"
    assert matcher.match(tmp_path / "sa.json.bak") is None


def test_a_credential_store_named_in_another_case_was_open_on_a_case_folding_filesystem(tmp_path):
    """``~/.SSH/id_rsa`` and ``~/.Aws/credentials`` are ``~/.ssh/id_rsa`` and ``~/.aws/credentials``
    on a case-folding filesystem (macOS, Windows), but the protected-store and secret-path tests
    compared the text as written: the file tools opened them. Any case is refused now."""
    from agent_server.policy.paths import CredentialStores

    home = str(tmp_path / "home")
    stores = CredentialStores(state_dir=str(tmp_path / "state"), home=home)
    assert stores.match(f"{home}/.SSH/id_rsa") and stores.match(f"{home}/.Aws/credentials")
    assert stores.match(str(tmp_path / "STATE" / "sessions" / "x" / "events.jsonl"))
    assert stores.match(f"{home}/projects/notes.txt") is None
    matcher = SecretMatcher(home=home, exact=[(str(tmp_path / "keys" / "sa.json"), "$GOOGLE_APPLICATION_CREDENTIALS")])
    assert matcher.match(f"{home}/.SSH/id_ed25519") == "~/.ssh/**"
    assert matcher.match(str(tmp_path / "KEYS" / "SA.json")) == "$GOOGLE_APPLICATION_CREDENTIALS"


@pytest.mark.parametrize("name", ["id_ed25519", "deploy_id_ed25519.bak", "id_ecdsa", "id_dsa"])
def test_an_ed25519_deploy_key_in_the_repository_was_searched_and_read_without_asking(tmp_path, name):
    """The defaults named RSA keys only (``*id_rsa*``): ``ssh-keygen``'s default since OpenSSH 9.5 is
    ed25519, so a deploy key committed to a repository (``deploy/id_ed25519``) was read and searched
    like any file."""
    assert SecretMatcher(home=str(tmp_path)).match(f"/w/deploy/{name}") is not None
