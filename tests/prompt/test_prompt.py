"""The system prompt and project instructions (AGENTS.md)."""

import shutil

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
