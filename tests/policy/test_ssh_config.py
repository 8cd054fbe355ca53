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
