"""Shell command analysis: the prefix an ``allow_always`` remembers, compound commands that are
never remembered, and the destructive commands that ask even under the sandbox."""

from __future__ import annotations

import pytest

from agent_server.policy.shell import (
    analyze, command_prefix, destructive_reason, path_words, prefix_matches, runs_code_from_arguments,
)


@pytest.mark.parametrize("command, prefix", [
    ("pytest", "pytest"),
    ("pytest -k x", "pytest"),
    ("pytest tests/test_a.py -q", "pytest"),
    ("npm test", "npm test"),
    ("npm test -- --watch", "npm test"),
    ("npm run build", "npm run build"),
    ("git status", "git status"),
    ("git status --short", "git status"),
    ("git diff HEAD~1", "git diff"),
    ("cargo test --release", "cargo test"),
    ("python -m pytest -q", "python -m pytest"),
    ("python3 scripts/check.py --fast", "python3 scripts/check.py"),
    ("uv run pytest -x", "uv run pytest"),
    ("./run_tests.sh a b", "./run_tests.sh"),
    ("ls -la", "ls"),
    ("pytest -q 2>&1", "pytest"),             # fd duplication is not a file redirection
    ("make test >/dev/null", "make test"),
    ("'pytest' -k 'a b'", "pytest"),
])
def test_prefix_is_the_leading_words_up_to_the_first_argument(command, prefix):
    assert command_prefix(command) == prefix


@pytest.mark.parametrize("command", [
    "pytest && rm -rf x", "pytest; ls", "pytest || true", "pytest | tee log", "sleep 1 &",
    "echo $(whoami)", "echo `whoami`", 'echo "$(id)"', "diff <(ls a) <(ls b)", "(cd x; make)",
    "pytest\nrm -rf x", "{ pytest; }",
])
def test_compound_commands_are_never_remembered(command):
    assert analyze(command).compound
    assert command_prefix(command) is None


@pytest.mark.parametrize("command", [
    "pytest > out.txt", "FOO=1 pytest", "sudo pytest", "env X=1 pytest", "python -c 'import os'",
    "bash -c 'pytest'", "python", "echo 'unterminated", "rm -rf build", "git push --force",
])
def test_commands_that_cannot_be_remembered_safely(command):
    assert command_prefix(command) is None


def test_a_remembered_prefix_covers_only_simple_commands_starting_with_its_words():
    assert prefix_matches("pytest", "pytest -k x")
    assert prefix_matches("git status", "git status --short")
    assert not prefix_matches("pytest", "pytest && rm -rf x")
    assert not prefix_matches("pytest", "pytest-watch")
    assert not prefix_matches("git status", "git stash")
    assert not prefix_matches("npm test", "npm install evil")
    assert not prefix_matches("pytest", "pytest > ~/.bashrc")


@pytest.mark.parametrize("command, needle", [
    ("rm -rf build", "rm -r"), ("rm -r x", "rm -r"), ("rm -R x", "rm -r"), ("rm --recursive x", "rm -r"),
    ("rm -fr x", "rm -r"), ("cd / && rm -rf ~/y", "rm -r"), ("pytest && rm -rf x", "rm -r"),
    ("git reset --hard", "reset --hard"), ("git reset --hard HEAD~3", "reset --hard"),
    ("git clean -fdx", "git clean"), ("git -C sub clean -f", "git clean"),
    ("git checkout -- .", "checkout"), ("git checkout -- src/a.py", "checkout"), ("git checkout .", "checkout"),
    ("git restore src/a.py", "restore"), ("git push --force", "push"), ("git push -f origin main", "push"),
    ("git push origin +main", "push"), ("git push --force-with-lease", "push"), ("git branch -D topic", "branch -D"),
    ("git stash drop", "stash"), ("find . -name '*.o' -delete", "find"), ("find . -exec rm {} +", "find"),
    ("sudo rm -rf /opt/x", "rm -r"), ("sudo -u bob rm -rf /x", "rm -r"), ("xargs rm -rf < list", "rm -r"),
    ("timeout 5 rm -r x", "rm -r"), ("bash -c 'rm -rf x'", "rm -r"), ("eval 'git reset --hard'", "reset --hard"),
    ("echo $(rm -rf x)", "rm -r"), ("dd if=/dev/zero of=disk.img", "dd"), ("mkfs.ext4 /dev/sdb1", "mkfs"),
    ("chmod -R 777 .", "chmod -R"), ("rsync -a --delete a/ b/", "rsync"), ("shred secret", "shred"),
])
def test_destructive_commands_are_recognised(command, needle):
    reason = destructive_reason(command)
    assert reason is not None and needle in reason


@pytest.mark.parametrize("command", [
    "rm x.txt", "rm -f x.txt", "git status", "git clean -n", "git restore --staged a.py", "git push origin main",
    "git checkout main", "git branch -d merged", "find . -name '*.py'", "pytest", "echo rm -rf x",
    "ls -R", "touch x",
])
def test_ordinary_commands_are_not_destructive(command):
    assert destructive_reason(command) is None


def test_path_words_include_arguments_option_values_and_redirection_targets():
    words = path_words("cat .env --config=~/.aws/config > ~/.ssh/authorized_keys")
    assert {".env", "~/.aws/config", "~/.ssh/authorized_keys"} <= set(words)
    assert "~/.netrc" in path_words("echo $(cat ~/.netrc)")  # substitutions are read too


@pytest.mark.parametrize("command, runner", [
    ("awk '{print}' f", "awk"), ("sed -n 1p f", "sed"), ("tar -xf a.tar", "tar"), ("find . -name x", "find"),
    ("xargs echo", "xargs"), ("env", "env"), ("git -c core.pager=sh log", "git"), ("git rebase --exec x main", "git"),
    ("git grep -Ocat x", "git"), ("python3 x.py", "python3"), ("perl x.pl", "perl"), ("ruby x.rb", "ruby"),
    ("node x.js", "node"), ("bash x.sh", "bash"), ("sh x.sh", "sh"), ("make test", "make"), ("ls | awk '{}'", "awk"),
])
def test_commands_that_run_code_from_their_arguments_are_listed(command, runner):
    assert runs_code_from_arguments(command) == runner


@pytest.mark.parametrize("command", ["pytest -q", "ls -la", "git status", "git diff HEAD", "npm test", "cargo build"])
def test_plain_commands_do_not_run_code_from_their_arguments(command):
    assert runs_code_from_arguments(command) is None
