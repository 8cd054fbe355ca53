"""The confined shell's own writes, recorded through seccomp user notifications (``sandbox_notify``):
what a command asks to change is named in the record, what it only reads is not, and a write by
another process is never in it."""

from __future__ import annotations

import contextlib
import subprocess
import os
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from agent_server.policy.sandbox import sandbox_notify
from support.timeouts import HANG

SCRIPT = r"""
import ctypes, os, sys, _thread
sys.path.insert(0, sys.argv[1])
import sandbox_notify as n
record = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
assert ctypes.CDLL(None, use_errno=True).prctl(38, 1, 0, 0, 0) == 0  # no_new_privs, as the sandbox sets it
listener = n.listen()
os.write(record, n.LISTENING)
_thread.start_new_thread(n.supervise, (listener, record))
child = os.fork()
if child == 0:
    os.chdir(sys.argv[3])
    os.execvp("bash", ["bash", "-c", sys.argv[4]])
_, status = os.waitpid(child, 0)
os._exit(os.waitstatus_to_exitcode(status))
"""


def supported() -> bool:
    try:
        sandbox_notify.build()
    except sandbox_notify.NotifyError:
        return False
    return True


def command_args(tmp_path: Path, work: Path, command: str, script: str = SCRIPT) -> list[str]:
    """How ``script`` runs ``command`` in ``work`` with its record at ``tmp_path / "record"``."""
    folder = str(Path(sandbox_notify.__file__).parent)
    return [sys.executable, "-I", "-S", "-B", "-c", script, folder, str(tmp_path / "record"), str(work), command]


def work_folder(tmp_path: Path, files: dict[str, str]) -> Path:
    """``tmp_path / "work"``, holding ``files`` (name → text)."""
    work = tmp_path / "work"
    work.mkdir()
    for name, text in files.items():
        (work / name).write_text(text)
    return work


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_commands_own_writes_are_recorded_and_nothing_else(tmp_path):
    work = work_folder(tmp_path, {"read.txt": "only read\n", "old.txt": "to be moved\n", "gone.txt": "to be removed\n",
                                  "run.sh": "#!/bin/sh\n", "other.txt": "written by someone else\n"})
    record = tmp_path / "record"
    command = ("cat read.txt > /dev/null; echo hi > new.txt; mv old.txt moved.txt; rm gone.txt; chmod +x run.sh; "
               "mkdir -p d/e; sed -i s/hi/ho/ new.txt; ln -s new.txt link.txt")
    subprocess.run(command_args(tmp_path, work, command), check=True, timeout=60)
    (work / "other.txt").write_text("another process wrote this meanwhile\n")
    named = sandbox_notify.read_record(str(record))
    assert named is not None
    for name in ("new.txt", "old.txt", "moved.txt", "gone.txt", "run.sh", "d/e", "link.txt"):
        assert str(work / name) in named, name
    assert str(work / "read.txt") not in named and str(work / "other.txt") not in named
    assert (work / "new.txt").read_text() == "ho\n"  # the calls went through unchanged


def test_a_record_without_its_header_or_with_an_unreadable_path_proves_nothing(tmp_path):
    record = tmp_path / "record"
    assert sandbox_notify.read_record(str(record)) is None
    record.write_bytes(b"/w/a.txt\0")
    assert sandbox_notify.read_record(str(record)) is None
    record.write_bytes(sandbox_notify.LISTENING + b"/w/a.txt\0" + sandbox_notify.INCOMPLETE)
    assert sandbox_notify.read_record(str(record)) is None
    record.write_bytes(sandbox_notify.LISTENING + b"/w/a.txt\0/w/b.txt\0")
    assert sandbox_notify.read_record(str(record)) == {"/w/a.txt", "/w/b.txt"}


WATCHED = SCRIPT.replace("listener = n.listen()", "watch = n.Watch()\nlistener = n.listen()").replace(
    "(listener, record))", "(listener, record, watch))").replace(
    "_, status = os.waitpid(child, 0)", "_, status = os.waitpid(child, 0)\nos.write(record, watch.finish())")


def run_watched(tmp_path: Path, work: Path, command: str, **popen: object) -> subprocess.Popen:
    return subprocess.Popen(command_args(tmp_path, work, command, WATCHED), **popen)


def wait_for(flag: Path, proc: subprocess.Popen) -> None:
    while not flag.exists():
        assert proc.poll() is None, "the command ended before its signal"
        time.sleep(0.01)


@contextlib.contextmanager
def paused(tmp_path: Path, files: dict[str, str], before: str, after: str = "") -> Iterator[Path]:
    """A watched command, in ``work_folder(tmp_path, files)``, that runs ``before``, waits while the
    ``with`` body (given the folder) acts as another process, then runs ``after``; it exits 0."""
    work = work_folder(tmp_path, files)
    proc = run_watched(tmp_path, work, f"{before}; touch wrote; while [ ! -e go ]; do sleep 0.02; done"
                                       + (f"; {after}" if after else ""))
    wait_for(work / "wrote", proc)
    try:
        yield work
    finally:  # (a failed body too: the command ends)
        (work / "go").touch()
    assert proc.wait(timeout=HANG) == 0


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_save_by_another_process_after_the_command_let_go_of_the_file_is_named_foreign(tmp_path):
    """The command wrote ``a.txt`` and went on running; another process saved ``a.txt`` meanwhile
    (in place, and ``b.txt`` by an editor's atomic rename): both are ``FOREIGN`` in the record."""
    with paused(tmp_path, {"a.txt": "orig\n", "b.txt": "orig\n"}, "echo agent >> a.txt; echo agent >> b.txt") as work:
        (work / "a.txt").write_text("orig\nagent\nthe user's save\n")
        (work / ".b.txt.swp").write_text("orig\nagent\nthe user's save\n")
        os.replace(work / ".b.txt.swp", work / "b.txt")
    record = str(tmp_path / "record")
    assert sandbox_notify.read_foreign(record) == {str(work / "a.txt"), str(work / "b.txt")}
    assert {str(work / "a.txt"), str(work / "b.txt")} <= sandbox_notify.read_record(record)


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_commands_own_writes_of_every_kind_are_never_named_foreign(tmp_path):
    """Appends, rewrites, ``sed -i`` (a temporary file renamed over), moves, modes, truncation,
    copies, a background process, a pipeline: only the command wrote, nothing is foreign, and the
    state it left is stamped (``LEFT``). (Two of its processes writing one file through two opens
    at once may be named foreign: which of them the last change was, the events do not say.)"""
    work = work_folder(tmp_path, {"f.txt": "a\n"})
    command = ("echo b >> f.txt; echo c >> f.txt; sed -i s/a/A/ f.txt; echo d > g.txt; mv g.txt h.txt; "
               "chmod +x h.txt; truncate -s 1 h.txt; cp f.txt i.txt; mkdir -p d/e; echo x > d/e/j.txt; "
               "(for i in 1 2 3; do echo $i >> k.txt; done) & wait; seq 100 | cat > k.txt; "
               "touch k.txt; rm i.txt")
    proc = run_watched(tmp_path, work, command)
    assert proc.wait(timeout=HANG) == 0
    record = str(tmp_path / "record")
    assert sandbox_notify.read_foreign(record) == set()
    left = sandbox_notify.read_stamps(record, sandbox_notify.LEFT)
    for name in ("f.txt", "h.txt", "d/e/j.txt", "k.txt"):
        assert left[str(work / name)] == (work / name).stat().st_ctime_ns, name
    assert str(work / "i.txt") not in left


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_an_editors_atomic_save_while_the_command_holds_the_file_open_is_named_foreign(tmp_path):
    """The command keeps ``a.txt`` open for writing (a log, a formatter's output) while an editor
    saves it the atomic way (a temporary file renamed over it): that rename is no call of the
    command's, so ``a.txt`` is ``FOREIGN``."""
    with paused(tmp_path, {"a.txt": "orig\n"}, "exec 3>>a.txt; echo agent >&3", "echo more >&3") as work:
        (work / ".a.txt.swp").write_text("orig\nagent\nthe user's save\n")
        os.replace(work / ".a.txt.swp", work / "a.txt")
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / "a.txt")}


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_an_in_place_save_while_the_command_holds_the_file_open_is_named_foreign(tmp_path):
    """The command keeps ``a.txt`` open for writing while another process saves it in place (opens,
    writes, closes): that close is not the command's — its descriptor is still open — so ``a.txt`` is
    ``FOREIGN``."""
    with paused(tmp_path, {"a.txt": "orig\n"}, "exec 3>>a.txt; echo agent >&3", "echo more >&3") as work:
        (work / "a.txt").write_text("orig\nagent\nthe user's save\n")
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / "a.txt")}


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("limit, reason", [("max_inotify_instances", "EMFILE"), ("max_inotify_watches", "ENOSPC")])
def test_a_watch_left_without_inotify_said_nothing_of_why_every_file_became_foreign(tmp_path, limit, reason):
    """No inotify instance (or no watch) left for the user: the watch is blind, so every file the
    command wrote is ``FOREIGN`` at the end (asked about at /undo: the safe side) — and the record now
    says why, once (``UNWATCHED``), so the user can be told. The command's writes are still recorded."""
    work = work_folder(tmp_path, {})
    limited = ["unshare", "-Ur", "sh", "-c", f'echo 0 > /proc/sys/user/{limit} && exec "$@"', "sh"]
    subprocess.run([*limited, *command_args(tmp_path, work, "echo a > a.txt; echo b > b.txt; echo c >> a.txt", WATCHED)],
                   check=True, timeout=60)
    record = str(tmp_path / "record")
    assert sandbox_notify.read_unwatched(record) == reason
    assert (tmp_path / "record").read_bytes().count(sandbox_notify.UNWATCHED) == 1
    assert {str(work / "a.txt"), str(work / "b.txt")} <= sandbox_notify.read_foreign(record)
    assert {str(work / "a.txt"), str(work / "b.txt")} <= sandbox_notify.read_record(record)
    # with inotify, none of it
    subprocess.run(command_args(tmp_path, work, "echo d >> a.txt", WATCHED), check=True, timeout=60)
    assert sandbox_notify.read_unwatched(record) is None
    assert str(work / "a.txt") not in sandbox_notify.read_foreign(record)


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_an_in_place_save_whose_close_the_kernel_merged_with_the_commands_own_close_counted_as_the_commands(tmp_path):
    """The known gap: the command holds ``a.txt`` open for writing; another process saves it in
    place (open, write, close) and the command then closes it with no other event of the folder and
    no drain between — inotify merges the two equal close events into one, so the save looked like
    the command's own close. The other process's open is seen (``IN_OPEN``) and no write-open of the
    command's nor a read that closed explains it: ``FOREIGN``."""
    work = work_folder(tmp_path, {"a.txt": "orig\n"})
    # the command and the test speak through its stdin and stdout (no path, no event between the closes)
    proc = run_watched(tmp_path, work, "exec 3>>a.txt; echo agent >&3; echo wrote; read go; exec 3>&-",
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"wrote\n"
    with open(work / "a.txt", "a") as fh:  # the user's in-place save
        fh.write("the user's save\n")
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / "a.txt")}


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("late_reader", [False, True])
def test_another_process_reading_a_file_the_command_writes_is_never_named_foreign(tmp_path, late_reader):
    """The other side of counting a written file's opens: an editor reloading the file the command
    writes (a read, two readers at once) writes nothing, so the command's writes stay its own (no
    question at /undo) — a reader still holding the file open when the command ends (``tail -f``)
    too: it was asked about until a lease probe told it from a writer whose close the kernel merged
    (``test_a_reader_holding_the_file_when_the_command_ended_made_undo_ask``)."""
    work = work_folder(tmp_path, {"a.txt": "orig\n"})
    proc = run_watched(tmp_path, work, "exec 3>>a.txt; echo agent >&3; echo wrote; read go; echo more >&3; "
                                       "echo again; read go; exec 3>&-; cat a.txt > /dev/null; echo b >> a.txt",
                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"wrote\n"
    assert (work / "a.txt").read_text() == "orig\nagent\n"
    with open(work / "a.txt") as one, open(work / "a.txt") as two:
        one.read(), two.read()
    proc.stdin.write(b"go\n")
    proc.stdin.flush()
    assert proc.stdout.readline() == b"again\n"
    with contextlib.ExitStack() as stack:
        if late_reader:  # still open when the command ends
            stack.enter_context(open(work / "a.txt"))
        proc.stdin.write(b"go\n")
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == set()


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_another_process_writing_dev_null_while_the_command_did_named_dev_null_foreign(tmp_path):
    """The watch followed every path the command opened for writing, /dev/null too: on a busy machine
    any other process's ``> /dev/null`` while the command ran made ``/dev/null`` FOREIGN (the flaky
    ``test_another_process_reading_a_file_the_command_writes_is_never_named_foreign``). A device, a
    fifo or a socket holds nothing a snapshot keeps: it is not followed."""
    with paused(tmp_path, {}, "echo a > /dev/null; echo a > a.txt", "echo b > /dev/null") as work:
        with open("/dev/null", "w") as other:  # another process's write, while the command runs
            other.write("x")
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == set()
    assert str(work / "a.txt") in sandbox_notify.read_record(str(tmp_path / "record"))


def talk(tmp_path: Path, work: Path, command: str) -> subprocess.Popen:
    """The watched command, speaking with the test through its stdin and stdout (no path: no event)."""
    return run_watched(tmp_path, work, command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)


def go_on(proc: subprocess.Popen, last: bool = True) -> None:
    proc.stdin.write(b"go\n")
    if last:
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
    else:
        proc.stdin.flush()


def a_save_while_it_waits_is_foreign(proc, tmp_path: Path, work: Path, name: str) -> None:
    """Once the command said ``wrote``, the user saves into ``name`` in place and the command goes
    on: the record counts exactly that file as another writer's (``FOREIGN``)."""
    assert proc.stdout.readline() == b"wrote\n"
    with open(work / name, "a") as fh:  # the user's in-place save
        fh.write("the user's save\n")
    go_on(proc)
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / name)}


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_save_into_a_file_the_command_created_whose_close_the_kernel_merged_was_not_seen(tmp_path):
    """The gap the open count left: a file the command creates was watched from the first event of
    it, not from its creating open — the user's in-place save into it while the command held it
    (the closes merged, nothing between) was counted nowhere, and ``/undo`` removed the file with the
    save in it. Its folder counts that name's opens from before the command's open until the file's
    own watch is in place: ``FOREIGN``."""
    work = work_folder(tmp_path, {})
    proc = talk(tmp_path, work, "exec 3>new.txt; echo agent >&3; echo wrote; read go; exec 3>&-")
    a_save_while_it_waits_is_foreign(proc, tmp_path, work, "new.txt")


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_save_into_a_file_the_command_replaced_by_a_rename_was_counted_for_the_name_it_had_before(tmp_path):
    """The rename variant: the command replaced ``a.txt`` by a file it created (``.a.tmp`` renamed
    over it — the old file still open, here by the command itself) and wrote it again; the user's
    in-place save then (the closes merged) was counted for ``.a.tmp``, a name gone at the end, and
    the old ``a.txt``'s count stood for the new one: nothing seen. Counted per inode: ``FOREIGN``."""
    work = work_folder(tmp_path, {"a.txt": "orig\n"})
    proc = talk(tmp_path, work, "echo agent >> a.txt; exec 4<a.txt; echo new > .a.tmp; mv .a.tmp a.txt; "
                                "exec 3>>a.txt; echo more >&3; echo wrote; read go; exec 3>&-")
    a_save_while_it_waits_is_foreign(proc, tmp_path, work, "a.txt")


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("created", [False, True])
def test_a_reader_holding_the_file_when_the_command_ended_made_undo_ask(tmp_path, created):
    """A reader that opened the file while the command wrote it and still held it at the end (an
    editor, ``tail -f``) was taken for a writer whose close the kernel merged with the command's:
    the file was ``FOREIGN`` and ``/undo`` asked. One open left over, every open of the file counted
    since its watch, and at the end somebody has it open and nobody for writing: a reader."""
    work = work_folder(tmp_path, {} if created else {"a.txt": "orig\n"})
    proc = talk(tmp_path, work, "exec 3>>a.txt; echo agent >&3; echo wrote; read go; echo more >&3; exec 3>&-")
    assert proc.stdout.readline() == b"wrote\n"
    with open(work / "a.txt") as tail:
        tail.read()
        go_on(proc)
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == set()


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("reader", ["during", "before"])
def test_a_reader_still_there_never_hides_a_save_whose_close_the_kernel_merged(tmp_path, reader):
    """The other side: a reader still holding the file at the end (one that opened during the
    command, or before it — an older ``tail -f``, whose open was never counted) and the user's
    in-place save whose close merged with the command's: the save is never taken for the reader."""
    work = work_folder(tmp_path, {"a.txt": "orig\n"})
    with contextlib.ExitStack() as stack:
        if reader == "before":
            stack.enter_context(open(work / "a.txt"))
        proc = talk(tmp_path, work, "exec 3>>a.txt; echo agent >&3; echo wrote; read go; exec 3>&-")
        assert proc.stdout.readline() == b"wrote\n"
        if reader == "during":  # it reads what is there, as tail -f and editors do
            stack.enter_context(open(work / "a.txt")).read()
        with open(work / "a.txt", "a") as fh:
            fh.write("the user's save\n")
        go_on(proc)
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / "a.txt")}


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_created_file_only_read_by_others_and_files_created_beside_it_stay_the_commands(tmp_path):
    """Counting a created file's opens by its folder must not count its neighbours' reads, nor the
    command's own later opens of it; many files created in one folder, each read by another process
    while the command ran: nothing is foreign, and the folder stops carrying opens afterwards."""
    work = work_folder(tmp_path, {"other.txt": "x\n"})
    proc = talk(tmp_path, work, "for i in 1 2 3; do echo $i > f$i.txt; done; echo wrote; read go; "
                                "for i in 1 2 3; do echo more >> f$i.txt; done; sed -i s/1/one/ f1.txt")
    assert proc.stdout.readline() == b"wrote\n"
    for name in ("f1.txt", "f2.txt", "f3.txt", "other.txt", "other.txt"):
        (work / name).read_text()
    go_on(proc)
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == set()
    assert (work / "f1.txt").read_text() == "one\nmore\n"


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("created", [False, True])
def test_a_read_whose_open_the_kernel_merged_with_the_commands_own_open_hid_a_later_save(tmp_path, created):
    """A file watcher read the file right after the command opened it (before it wrote): the two
    equal ``IN_OPEN`` events merged into one, the read's close then took one off the count, and the
    user's save later (its close merged with the command's) brought it back to zero — unseen (the
    end-to-end test's own polling found it). The command's announced open takes the next open seen,
    and a close never takes the count below zero: ``FOREIGN``."""
    work = work_folder(tmp_path, {} if created else {"a.txt": "orig\n"})
    proc = talk(tmp_path, work, "exec 3>>a.txt; echo opened; read go; echo agent >&3; echo wrote; read go; exec 3>&-")
    assert proc.stdout.readline() == b"opened\n"
    (work / "a.txt").read_bytes()  # a watcher's read, right after the command's open
    go_on(proc, last=False)
    a_save_while_it_waits_is_foreign(proc, tmp_path, work, "a.txt")


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("why", ["batch", "reads"])
def test_a_created_file_moved_to_its_own_watch_still_saw_a_save_whose_close_the_kernel_merged(tmp_path, why):
    """A created file's opens move from its folder's watch to its own in batches (64 created files),
    or sooner when the folder's watch carries many reads of other files (a build reading its sources
    there) — the switch marked in the queue: the user's save into it afterwards (the closes merged) is
    still counted, and the files only the command wrote stay its own."""
    files = {f"r{i}.txt": "x\n" for i in range(600)} if why == "reads" else {}
    work = work_folder(tmp_path, files)
    before = ("for i in $(seq 1 70); do echo $i > f$i.txt; done" if why == "batch"
              else "echo 1 > f1.txt; cat r*.txt > /dev/null; : > /dev/null")
    proc = talk(tmp_path, work, f"{before}; exec 3>>f1.txt; echo agent >&3; echo wrote; read go; exec 3>&-")
    assert proc.stdout.readline() == b"wrote\n"
    (work / "f2.txt").exists() and (work / "f2.txt").read_bytes()  # a read of another created file
    with open(work / "f1.txt", "a") as fh:
        fh.write("the user's save\n")
    go_on(proc)
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / "f1.txt")}


def test_a_file_the_lease_probe_could_not_open_let_the_commands_open_stand_for_the_probes(tmp_path, monkeypatch):
    """The probe's own open was taken in advance for the next open seen, even when the probe could
    not open the file (no read permission, no ``/proc``): the command's open then stood for the
    probe's and the user's for the command's — a save whose close merged with the command's, unseen.
    Only a probe that opened the file is expected. (In-process: the watch's own calls, made in the
    order the supervisor makes them.)"""
    monkeypatch.setattr(sandbox_notify, "_lease", lambda path, inode, kinds: (False, None))
    path = work_folder(tmp_path, {"a.txt": "orig\n"}) / "a.txt"
    watch = sandbox_notify.Watch()
    watch.arm([os.fsencode(path)], 4242, True, os.O_WRONLY | os.O_APPEND)
    command = os.open(path, os.O_WRONLY | os.O_APPEND)  # the command's own write-open
    os.write(command, b"agent\n")
    with open(path, "ab") as user:  # the user's in-place save, closed right before the command's close
        user.write(b"the user's save\n")
    os.close(command)
    assert sandbox_notify.FOREIGN + os.fsencode(path) + b"\0" in watch.finish()


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_sqlite_wal_like_loop_overflowed_the_watchs_queue_and_every_file_the_command_changed_became_foreign(tmp_path):
    """A command that reads one file and writes another through descriptors it holds, in a loop (as
    SQLite in WAL mode does), makes no call that drains the watch: the reads' events (counted on the
    written file's own watch) and the writes' filled the queue, it overflowed, and every path was
    blind — each file the command changed (``out.txt`` before the loop too) was asked about at /undo.
    The queue is read once half full; a loop this tight still overflows it, and then only the paths
    changed since the last whole read, or held open for writing then (``db``, ``wal``: the loop's
    own, asked about), are blind — ``out.txt`` stays the command's, and no blind watch is said."""
    loop = "import os\nfor i in range(60000):\n    os.pread(3, 1, 0)\n    os.pwrite(4, b'x', i % 4096)\n"
    work = work_folder(tmp_path, {"db": "d" * 4096, "wal": "", "loop.py": loop})
    command = "echo agent > out.txt; exec 3<>db 4<>wal; python3 -I -S loop.py || exit 9; exec 3>&- 4>&-"
    proc = run_watched(tmp_path, work, command)
    assert proc.wait(timeout=HANG) == 0
    record = str(tmp_path / "record")
    assert sandbox_notify.read_unwatched(record) is None
    assert sandbox_notify.read_foreign(record) <= {str(work / "db"), str(work / "wal")}
    assert str(work / "out.txt") in sandbox_notify.read_record(record)
    assert (work / "out.txt").read_text() == "agent\n"


def test_an_overflow_left_only_the_paths_changed_since_the_last_whole_read_blind(tmp_path):
    """The overflow itself, without a kernel to flood: the paths let go and unchanged since the last
    read that lost nothing stay followed; one changed since, one still held, are blind."""
    tick = sandbox_notify._TICK_NS
    quiet, touched, held = (tmp_path / n for n in ("quiet.txt", "touched.txt", "held.txt"))
    for p in (quiet, touched, held):
        p.write_text("x\n")
    changed_at = quiet.stat().st_ctime_ns
    while time.time_ns() < changed_at + 3 * tick:  # the clock, not an event: a status-change time's granularity
        time.sleep(0.005)
    touched.write_text("y\n")  # after the last whole read
    watch = sandbox_notify.Watch()
    try:
        watch.clean_read_ns = changed_at + 2 * tick
        names = {p: os.fsencode(p) for p in (quiet, touched, held)}
        watch.state = {names[quiet]: (sandbox_notify._LET_GO, 0), names[touched]: (sandbox_notify._LET_GO, 0),
                       names[held]: (sandbox_notify._HELD, 0)}
        watch._overflowed()
        assert watch.blind == {names[touched], names[held]}
    finally:
        os.close(watch.fd)


TMPFILE_LINK = """import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open(".", os.O_TMPFILE | os.O_WRONLY, 0o644)  # a file with no name yet: its events are "#<inode>"
os.write(fd, b"made with no name\\n")
assert libc.linkat(fd, b"", -100, b"linked.txt", 0x1000) == 0, ctypes.get_errno()  # AT_EMPTY_PATH
print("linked", flush=True)
sys.stdin.readline()
os.write(fd, b"written after the link\\n")
os.close(fd)
"""


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
@pytest.mark.parametrize("save", [False, True])
def test_a_file_made_with_o_tmpfile_and_linkat_is_the_commands_and_a_save_into_it_meanwhile_is_foreign(tmp_path, save):
    """``O_TMPFILE`` + ``linkat``: the open names the folder, the link the file (a path call: the
    record names it, its creation is the command's); the command's writes through its descriptor
    are events of the unnamed inode's "#<inode>" name, never the file's. Not foreign — but a save
    into ``linked.txt`` by another process while the command still holds its descriptor is: its
    events name the file, and no process of the command holds that path open for writing."""
    work = work_folder(tmp_path, {"t.py": TMPFILE_LINK})
    proc = run_watched(tmp_path, work, "python3 -I -S t.py", stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"linked\n"
    if save:
        with open(work / "linked.txt", "a") as fh:
            fh.write("the user's save\n")
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    assert proc.wait(timeout=HANG) == 0
    record = str(tmp_path / "record")
    assert str(work / "linked.txt") in sandbox_notify.read_record(record)
    assert sandbox_notify.read_foreign(record) == ({str(work / "linked.txt")} if save else set())
    # (the command writes at its own offset, over the save's bytes)
    assert (work / "linked.txt").read_text() == "made with no name\nwritten after the link\n"


# a supervisor that reads the queue only at the command's calls (a busy machine: ``keep_up`` not in
# time), so that equal events with nothing between stay merged as the kernel queued them
UNHURRIED = WATCHED.replace("import sandbox_notify as n\n", "import sandbox_notify as n\nn.Watch.keep_up = lambda self: None\n")


@pytest.mark.skipif(not supported(), reason="no seccomp user notifications for this architecture")
def test_a_readers_and_a_writers_open_merged_into_one_event_hid_a_save_whose_close_merged_with_the_commands(tmp_path):
    """The command holds ``a.txt`` open for writing. Another process opens it to read and a third to
    write at once (two equal ``IN_OPEN`` events with nothing between: one), the reader closes (its
    read's close takes back the one open counted), the writer saves and closes, and the command closes
    right after (the two close events merged): no open left over, no close of another's — the save
    was unseen. Each close-after-write is now an event of the file's own watch too, so two closes are
    never equal neighbours in the queue: the writer's close lets the path go, the command's is then
    another change of a path let go — ``FOREIGN``."""
    work = work_folder(tmp_path, {"a.txt": "orig\n"})
    proc = subprocess.Popen(command_args(tmp_path, work, "exec 3>>a.txt; echo agent >&3; echo wrote; read go; exec 3>&-",
                                         UNHURRIED), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"wrote\n"
    reader = os.open(work / "a.txt", os.O_RDONLY)
    writer = os.open(work / "a.txt", os.O_WRONLY | os.O_APPEND)
    os.close(reader)
    os.write(writer, b"the user's save\n")
    os.close(writer)
    proc.stdin.write(b"go\n")
    proc.stdin.close()
    assert proc.wait(timeout=HANG) == 0
    assert sandbox_notify.read_foreign(str(tmp_path / "record")) == {str(work / "a.txt")}
