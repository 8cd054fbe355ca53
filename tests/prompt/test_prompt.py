"""The system prompt and project instructions (AGENTS.md)."""

import os
import shutil
from pathlib import Path

from agent_server.prompt import PromptEnvironment, render_system_prompt
from agent_server.prompt.instructions import MAX_CHARS, instruction_paths, read_instructions

from support.paths import FILES_DIR

AGENTS = FILES_DIR / "agents_md"


def env(**kw):
    return PromptEnvironment(roots=("/w",), os_name="Linux", shell="/bin/bash", date="2026-11-29", **kw)


def test_rendering_is_deterministic_and_states_the_environment():
    e = env(tool_names=("read", "bash"), mode="read-only", sandboxed=True)
    text = render_system_prompt(e)
    assert text == render_system_prompt(e)
    for needle in ("/w", "Linux", "2026-11-29", "read, bash", "read-only", "OS sandbox"):
        assert needle in text


def test_instructions_of_root_and_folders_down_to_the_focus_file_nearest_last(tmp_path):
    root = tmp_path / "proj"
    (root / "pkg" / "sub").mkdir(parents=True)
    shutil.copy(AGENTS / "agentclientprotocol__agent-client-protocol__AGENTS.md", root / "AGENTS.md")
    shutil.copy(AGENTS / "olimorris__codecompanion.nvim__AGENTS.md", root / "pkg" / "AGENTS.md")
    (root / "pkg" / "sub" / "x.py").write_text("")
    (tmp_path / "AGENTS.md").write_text("outside the root: never read")
    paths = instruction_paths([root], focus=[root / "pkg" / "sub" / "x.py"])
    assert paths == [(root / "AGENTS.md").resolve(), (root / "pkg" / "AGENTS.md").resolve()]
    records = read_instructions(paths)
    text = render_system_prompt(env(instructions=tuple(records)))
    assert text.index(str(paths[0])) < text.index(str(paths[1]))
    assert (root / "AGENTS.md").read_text().strip()[:200] in text
    assert "never read" not in text


def test_huge_instruction_file_is_bounded(tmp_path):
    (tmp_path / "AGENTS.md").write_text("x" * (MAX_CHARS + 500))
    (record,) = read_instructions(instruction_paths([tmp_path]))
    assert len(record["text"]) < MAX_CHARS + 200 and "more characters not shown" in record["text"]


def test_an_agents_md_linked_to_a_secret_put_it_into_the_system_prompt(tmp_path):
    """A cloned repository's ``AGENTS.md`` may be a link: to ``~/.aws/credentials``, to the
    repository's own ``.env``, to ``/proc/self/environ`` (the server's environment, its key). It
    was read through the link into the system prompt, i.e. sent to the model. A link is followed
    only to a regular file inside the same root that the host allows; ``AGENTS.md -> CLAUDE.md``
    still works."""
    home, root = tmp_path / "home", tmp_path / "proj"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = AWS-MATERIAL\n")
    for sub, target in (("a", home / ".aws" / "credentials"), ("b", root / ".env"), ("c", Path("/proc/self/environ")),
                        ("d", root / "CLAUDE.md")):
        (root / sub).mkdir(parents=True)
        (root / sub / "AGENTS.md").symlink_to(target)
        (root / sub / "x.py").write_text("")
    (root / ".env").write_text("TOKEN=ENV-MATERIAL\n")
    (root / "CLAUDE.md").write_text("Run the tests with make test.\n")
    os.symlink(home / ".aws" / "credentials", root / "AGENTS.md")
    focus = [root / sub / "x.py" for sub in "abcd"]
    paths = instruction_paths([root], focus, may_read=lambda real: real.name != ".env")
    assert paths == [root / "d" / "AGENTS.md"]
    text = render_system_prompt(env(instructions=tuple(read_instructions(paths))))
    assert "make test" in text and "MATERIAL" not in text


def test_an_agents_md_link_swapped_after_its_check_was_read_through_to_the_file_it_pointed_to_then(tmp_path):
    """The link's target was checked when the files were listed (in the root, not secret) and
    resolved again when read: a process of the workspace (a command the model left running) that
    re-points ``AGENTS.md`` — or swaps a folder on its way for a link — in between had that file
    read into the system prompt (``~/.aws/credentials``). What is read is the file the open
    reached, checked again: outside the root or not allowed, it is skipped."""
    home, root = tmp_path / "home", tmp_path / "proj"
    (home / ".aws").mkdir(parents=True)
    (home / ".aws" / "credentials").write_text("aws_secret_access_key = AWS-MATERIAL\n")
    root.mkdir()
    (root / "notes").mkdir()
    (root / "notes" / "credentials").write_text("Run the tests with make test.\n")
    (root / "AGENTS.md").symlink_to(root / "notes" / "credentials")
    checked: list[Path] = []

    def may_read(real: Path) -> bool:
        checked.append(real)
        if len(checked) == 1:  # right after the check: the folder on the way becomes a link out
            (root / "notes" / "credentials").unlink()
            (root / "notes").rmdir()
            (root / "notes").symlink_to(home / ".aws")
        return not str(real).startswith(str(home))

    paths = instruction_paths([root], may_read=may_read)
    assert paths == [root / "AGENTS.md"] and checked == [root / "notes" / "credentials"]
    records = read_instructions(paths, may_read=may_read, roots=[root])
    assert "MATERIAL" not in repr(records), records


def _bump(path: Path, seconds: int) -> None:
    """Set ``path``'s times ``seconds`` later than now: a change at a later clock tick, whatever the
    file system's timestamp granularity."""
    import time
    later = time.time_ns() + seconds * 10**9
    os.utime(path, ns=(later, later), follow_symlinks=False)


def test_the_remembered_agents_md_is_read_again_once_created_edited_replaced_or_removed(tmp_path, monkeypatch):
    from agent_server.prompt import instructions
    from agent_server.prompt.instructions import InstructionsMemo

    monkeypatch.setattr(instructions, "RACY_SECONDS", -3600.0)  # every file counts as old: remembered
    root = tmp_path / "root"
    root.mkdir()
    memo = InstructionsMemo()
    assert memo.records([root]) == []
    agents = root / "AGENTS.md"
    agents.write_text("one\n")
    _bump(root, 10)
    assert [r["text"] for r in memo.records([root])] == ["one\n"]
    agents.write_text("two\n")  # same size
    _bump(agents, 20)
    assert [r["text"] for r in memo.records([root])] == ["two\n"]
    other = root / "CLAUDE.md"
    other.write_text("three\n")
    agents.unlink()
    agents.symlink_to("CLAUDE.md")  # a link inside the root: followed, and never remembered
    _bump(root, 30)
    assert [r["text"] for r in memo.records([root])] == ["three\n"]
    other.write_text("four\n")
    assert [r["text"] for r in memo.records([root])] == ["four\n"]
    agents.unlink()
    _bump(root, 40)
    assert memo.records([root]) == []


def test_an_agents_md_changed_within_its_timestamps_granularity_is_read_at_every_turn(tmp_path, monkeypatch):
    from agent_server.prompt import instructions
    from agent_server.prompt.instructions import InstructionsMemo

    (tmp_path / "AGENTS.md").write_text("fresh\n")  # just written: a change now might not change its stat
    reads = []
    real = instructions.read_instructions
    monkeypatch.setattr(instructions, "read_instructions", lambda paths, *rest: reads.append(1) or real(paths, *rest))
    memo = InstructionsMemo()
    for _ in range(3):
        assert [r["text"] for r in memo.records([tmp_path])] == ["fresh\n"]
    assert len(reads) == 3
    monkeypatch.setattr(instructions, "RACY_SECONDS", -3600.0)
    memo.records([tmp_path])
    memo.records([tmp_path])
    assert len(reads) == 4  # once old enough, remembered
