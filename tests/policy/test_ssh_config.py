"""The private keys ``~/.ssh/config`` names outside ``~/.ssh`` (``policy.ssh_config``): found as ssh
finds them — tokens, quotes, ``=``, ``Include`` — and only the configuration files are read."""

from __future__ import annotations

import os

from agent_server.policy.paths import named_credentials
from agent_server.policy.ssh_config import identity_files, split_words


def test_words_split_as_ssh_splits_them():
    assert split_words('  IdentityFile "~/My Keys/id"  # comment') == ["IdentityFile", "~/My Keys/id"]
    assert split_words("IdentityFile=~/k") == ["IdentityFile", "~/k"]
    assert split_words("IdentityFile = ~/k") == ["IdentityFile", "~/k"]
    assert split_words(r"IdentityFile ~/a\ b 'c d'") == ["IdentityFile", "~/a b", "c d"]
    assert split_words("# IdentityFile ~/k") == []


def test_a_key_ssh_config_names_outside_dot_ssh_was_not_secret(tmp_path):
    """``IdentityFile ~/keys/work.pem`` (and ``%d``, quoted, ``=`` and included spellings of the same
    thing) named a private key that neither the file tools nor the shell's masks knew about: it was
    read like any file. Each is found now, and policy protects it like the keys in ``~/.ssh``."""
    home = tmp_path / "home"
    keys = home / "keys"
    (home / ".ssh" / "conf.d").mkdir(parents=True)
    keys.mkdir()
    for name in ("work.pem", "My Key", "deploy", "github.com.key", "gitlab.com.key", "eq"):
        (keys / name).write_text("PRIVATE\n")
    (home / ".ssh" / "config").write_text(
        "Host work\n  IdentityFile ~/keys/work.pem\n"
        'Host *.corp\n  IdentityFile "%d/keys/My Key"\n'
        "Host *\n  IdentityFile none\n  IdentityFile=${KEYS}/deploy\n"
        "Include conf.d/*.conf\n")
    (home / ".ssh" / "conf.d" / "git.conf").write_text("Match host git*\n    identityfile %d/keys/%h.key\n"
                                                       "Host eq\n IdentityFile = keys/eq\n")
    found = identity_files(str(home), {"HOME": str(home), "KEYS": str(keys)}, system=str(tmp_path / "none"))
    assert sorted(found) == sorted(str(keys / n) for n in ("work.pem", "My Key", "deploy", "github.com.key",
                                                          "gitlab.com.key", "eq"))
    labels = dict(named_credentials([tmp_path / "ws"], {"HOME": str(home), "KEYS": str(keys)}, home=str(home)))
    assert labels[str(keys / "work.pem")] == "~/.ssh/config (IdentityFile)"


def test_an_include_loop_a_fifo_or_a_missing_file_in_ssh_config_neither_hangs_nor_fails(tmp_path):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    os.mkfifo(home / ".ssh" / "fifo")
    (home / ".ssh" / "config").write_text("Include config\nInclude fifo\nInclude missing /dev/zero\n"
                                          "IdentityFile /k/a\n")
    assert identity_files(str(home), {"HOME": str(home)}, system=str(tmp_path / "none")) == ["/k/a"]


def test_a_relative_identityfile_was_taken_from_home_though_ssh_takes_it_from_its_working_folder(tmp_path):
    """``IdentityFile deploy/key`` is opened by ssh from the folder it runs in (OpenSSH's
    ``tilde_expand`` leaves a relative name as it is): run by the agent's shell, that is the
    workspace, where a repository's ``deploy/key`` was read like any file. It counts in each root
    now, and in the home folder as before (a terminal's usual folder)."""
    home, ws = tmp_path / "home", tmp_path / "ws"
    (home / ".ssh").mkdir(parents=True)
    (ws / "deploy").mkdir(parents=True)
    (ws / "deploy" / "key").write_text("PRIVATE\n")
    (home / ".ssh" / "config").write_text("Host prod\n  IdentityFile deploy/key\n")
    env = {"HOME": str(home)}
    found = identity_files(str(home), env, system=str(tmp_path / "none"), workdirs=[str(ws)])
    assert found == [str(home / "deploy" / "key"), str(ws / "deploy" / "key")]
    labels = dict(named_credentials([ws], env, home=str(home)))
    assert labels[str(ws / "deploy" / "key")] == "~/.ssh/config (IdentityFile)"
