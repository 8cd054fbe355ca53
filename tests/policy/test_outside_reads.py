"""Reads that resolve outside the workspace (newcomer 5 finding 4): a cloned repository's link to
``/etc`` let ``read`` send ``/etc/shadow`` to the model with no question. System credential
stores are refused like ``~/.ssh``; any other read outside the roots asks (once per file, or
always for its folder), unless ``[policy] read_allowed`` lists it; shell history files are secret
files (asked). Reads inside the roots never ask."""

from __future__ import annotations

import json
import os

import pytest

from agent_server.config.load import PolicySettings
from agent_server.policy.approvals import ALLOW_ALWAYS, ALLOW_ONCE, REJECT_ONCE, Answer
from agent_server.policy.engine import SessionPolicy
from agent_server.policy.modes import DANGER_FULL_ACCESS, ModeState
from agent_server.policy.paths import CredentialStores
from agent_server.policy.sandbox.confiner import SandboxStatus
from agent_server.session import EventLog
from agent_server.tools import get_tool, validate_args
from agent_server.tools.pipeline import PreparedCall

FULL = SandboxStatus("auto", 7, True, True, True, None)


def _prepared(name, n=0, **args):
    tool = get_tool(name)
    raw = json.dumps(args)
    return PreparedCall(f"c{n}-{name}", f"tc{n}-{name}", name, raw, tool, validate_args(tool, raw))


class Recorder:
    """Answers every question with the next of ``answers`` and keeps the questions."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.questions = []

    async def ask(self, question):
        self.questions.append(question)
        if not self.answers:
            raise AssertionError(f"asked once too often: {question.title}")
        return Answer("selected", self.answers.pop(0))


def _policy(tmp_path, approver, mode="workspace-write", settings=None):
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    log = EventLog.create(tmp_path / f"log-{len(os.listdir(tmp_path))}.jsonl", {"cwd": str(ws)})

    async def emit(update):
        pass

    policy = SessionPolicy(log, [ws], settings or PolicySettings(), ModeState(log, mode), approver, emit,
                           tmp_path / "state" / "sessions" / "s1" / "tmp", status=FULL)
    policy.protected = CredentialStores(config=[tmp_path / "conf"], state_dir=tmp_path / "state",
                                        session_dir=tmp_path / "state" / "sessions" / "s1", home=str(home), roots=[ws])
    return policy, ws, log


def _decisions(log):
    return [e.data for e in log.events if e.type == "policy/decision"]


@pytest.mark.parametrize("mode", ["read-only", "workspace-write", DANGER_FULL_ACCESS])
async def test_a_cloned_repositorys_link_to_etc_let_the_model_read_etc_shadow_unasked(tmp_path, mode):
    approver = Recorder()
    policy, ws, log = _policy(tmp_path, approver, mode)
    (ws / "etclink").symlink_to("/etc")
    for n, call in enumerate((_prepared("read", path="etclink/shadow"), _prepared("read", path="/etc/gshadow"),
                              _prepared("grep", pattern="root", path="etclink/shadow"),
                              _prepared("read", path="etclink/sudoers"), _prepared("glob", pattern="*", path="etclink/sudoers.d"),
                              _prepared("read", path="etclink/ssh/ssh_host_ed25519_key"))):
        denial = await policy.guard(call)
        assert denial is not None and "system credential store" in denial.reason, (call.name, call.raw_arguments)
    assert approver.questions == []  # refused, not asked: no answer of the user lets them through
    assert {d["rule"] for d in _decisions(log)} == {"credential-store"}


async def test_a_read_through_a_link_out_of_the_workspace_asked_nobody(tmp_path):
    outside = tmp_path / "elsewhere"
    (outside / "deep").mkdir(parents=True)
    (outside / "notes.txt").write_text("private notes")
    (outside / "deep" / "more.txt").write_text("more")
    approver = Recorder(REJECT_ONCE, ALLOW_ONCE, ALLOW_ALWAYS)
    policy, ws, log = _policy(tmp_path, approver)
    (ws / "link").symlink_to(outside)
    (ws / "inside.txt").write_text("fine")
    assert await policy.guard(_prepared("read", 1, path="inside.txt")) is None  # no question inside the roots
    assert await policy.guard(_prepared("grep", 2, pattern="x")) is None
    rejected = await policy.guard(_prepared("read", 3, path="link/notes.txt"))
    assert rejected is not None and "reject" in rejected.reason.lower()
    assert await policy.guard(_prepared("read", 4, path="link/notes.txt")) is None  # asked again: allowed once
    assert await policy.guard(_prepared("grep", 5, pattern="x", path=str(outside / "deep"))) is None  # always
    assert await policy.guard(_prepared("glob", 6, pattern="*", path="link/deep")) is None  # remembered
    assert await policy.guard(_prepared("read", 7, path="link/deep/more.txt")) is None
    assert len(approver.questions) == 3
    first = approver.questions[0]
    assert first.title == f"Read {ws / 'link' / 'notes.txt'}"
    names = {o["optionId"]: o["name"] for o in first.options_json()}
    assert names[ALLOW_ALWAYS] == f"Always allow reading in {outside.resolve()}"
    text = first.content[-1]["content"]["text"]
    assert "outside the workspace" in text and "sent to the model" in text
    rules = [(d["rule"], d["outcome"], d["decided_by"]) for d in _decisions(log)]
    assert rules[:2] == [("workspace", "allow", "policy")] * 2
    assert rules[2][:2] == ("outside-read", "deny") and rules[3][:2] == ("outside-read", "allow")
    assert rules[-1] == ("outside-read", "allow", "remembered: always allow reading in "
                         f"`{(outside / 'deep').resolve()}`")
    # the remembered folder does not cover its parent
    approver.answers.append(REJECT_ONCE)
    assert await policy.guard(_prepared("read", 8, path="link/notes.txt")) is not None


async def test_read_allowed_and_the_sessions_spill_folder_are_read_without_a_question(tmp_path):
    outside = tmp_path / "registry"
    outside.mkdir()
    (outside / "lib.rs").write_text("fn main() {}")
    policy, ws, log = _policy(tmp_path, Recorder(), settings=PolicySettings(read_allowed=[str(outside)]))
    spill = tmp_path / "state" / "sessions" / "s1" / "spill"
    spill.mkdir(parents=True)
    (spill / "out.txt").write_text("spilled")
    assert await policy.guard(_prepared("read", 1, path=str(outside / "lib.rs"))) is None
    assert await policy.guard(_prepared("read", 2, path=str(spill / "out.txt"))) is None
    assert [d["rule"] for d in _decisions(log)] == ["read-allowed", "read-allowed"]


@pytest.mark.parametrize("name", [".bash_history", ".zsh_history", ".python_history", ".mysql_history",
                                  ".psql_history", ".node_repl_history", ".sqlite_history", ".lesshst",
                                  ".local/share/fish/fish_history"])
async def test_the_shell_history_with_a_typed_password_was_read_unasked(tmp_path, monkeypatch, name):
    home = tmp_path / "home"
    (home / name).parent.mkdir(parents=True, exist_ok=True)
    (home / name).write_text("mysql -u root -pHUNTER2\n")
    monkeypatch.setenv("HOME", str(home))
    approver = Recorder(REJECT_ONCE)
    policy, ws, log = _policy(tmp_path, approver, DANGER_FULL_ACCESS)  # asked even where outside reads are not
    assert await policy.guard(_prepared("read", path=f"~/{name}")) is not None
    (question,) = approver.questions
    assert "may hold secrets" in question.content[-1]["content"]["text"]
    assert _decisions(log)[-1]["rule"] == "secret-read"


async def test_a_read_whose_file_became_a_link_between_the_policys_two_resolutions_asked_though_allowed(
        tmp_path, monkeypatch):
    """The final check's failure (CI of 6c43c03, ``test_link_swap_during_write_never_lands_outside``
    hung on a question): a process flipping ``target.txt`` between a file and a link out of the
    workspace — ``read_allowed`` listing where it leads — got a read asked about. The policy
    resolved the path once (a file in the workspace), then ``inside_roots`` resolved it again (now
    the link: outside), and ``read_allowed`` was asked of the first resolution: neither inside nor
    allowed. One resolution decides now."""
    from agent_server.policy import paths

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("same\n")
    policy, ws, log = _policy(tmp_path, Recorder(), settings=PolicySettings(read_allowed=[str(outside)]))
    (ws / "target.txt").write_text("same\n")
    real = paths.resolve
    seen = []

    def flipping(path):  # the file at the first resolution, the link at every later one
        if str(path).endswith("target.txt"):
            seen.append(path)
            return real(path) if len(seen) == 1 else outside / "target.txt"
        return real(path)

    monkeypatch.setattr(paths, "resolve", flipping)
    assert await policy.guard(_prepared("read", 1, path="target.txt")) is None
    assert _decisions(log)[-1]["rule"] == "workspace"
