"""The ``bash`` tool: run a shell command in the workspace, bounded in time and memory.

Role: run ``bash -c COMMAND`` (``/bin/sh`` when there is no bash) in ``roots[0]`` as the leader of
its own process group, stdin ``/dev/null``, stdout and stderr combined in one pipe (so their order
is kept); read the output incrementally keeping only its head and tail (1 MB each) and the total
count, saving an output bigger than that to a spill file up to ``ToolContext.max_spill_bytes``
(16 MiB by default; the rest is read and dropped, and the result says how many bytes); report the
exit code. On timeout or cancellation the whole group gets SIGTERM, then SIGKILL
after a grace period, and a result is still returned with the output so far.

Must never: leave a process of its group running after a timeout or a cancellation, or hold more
than ``HEAD_BYTES + TAIL_BYTES`` (+ one read chunk) of output in memory.

With ``ToolContext.shell_launcher`` set (policy's OS sandbox), the launcher decides how the
command starts (e.g. through ``agent_server.policy.sandbox.sandbox_exec`` under Landlock), may refuse it,
and supplies a hint that is added when a command's output shows a permission error.

Under the OS sandbox each command runs in its own PID namespace: when the shell exits, every
process it started ends with it (``setsid``/``nohup`` daemons included), and the launch's ``after``
hook (the setuid sweep) runs once all of them are gone. Unconfined, it runs under a child subreaper
(the launcher's, else ``procs.reaped``; Linux) that kills every process it left (``setsid`` ones
too) when the shell exits, is stopped, or the server dies. Elsewhere a background job that keeps the output pipe open
after the shell exits is stopped (its group) once the pipe stays open ``DRAIN_SECONDS``.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Protocol

from pydantic import Field

from .base import Tool, ToolArgs, ToolContext, ToolResult, one_line
from .child_env import dropped_notice
from .files import CURRENT_TOOL_CALL
from . import procs
from .live import LIVE_OUTPUT
from .output import SPILL_LIMIT_BYTES, open_spill_file, spill_room
from .procs import KILL_GRACE_SECONDS, exit_text, reaped, terminate_group, wait_exit
from .shell_network import again_with_network, wants_network
from .user_wait import awaiting_user

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
#: Output kept from the start and from the end of a command's output, in bytes.
HEAD_BYTES = 1024 * 1024
TAIL_BYTES = 1024 * 1024
#: The same when the turn is cancelled: the user waits for the answer, so the group gets a short
#: SIGTERM grace, then SIGKILL, and the answer waits for no more than the leader's exit status.
CANCEL_GRACE_SECONDS = 0.2
#: Seconds to keep reading after the shell exited while a background job holds the pipe.
DRAIN_SECONDS = 0.5
_CHUNK = 64 * 1024


#: Output that means the OS (or the sandbox) refused an access.
PERMISSION_MARKERS = ("Permission denied", "Read-only file system", "Operation not permitted", "EACCES", "EROFS")


class ShellLauncher(Protocol):
    """``ToolContext.shell_launcher``: ``(argv, env) -> launch`` where ``launch`` has ``argv``,
    ``env`` (what to execute), ``refuse`` (``str``: run nothing, return this error), ``failure_hint``
    (``str | None``), optionally ``hint_markers`` (output that shows the hint; default
    ``PERMISSION_MARKERS``) and ``meta`` (``dict``, logged with the result)."""

    def __call__(self, argv: list[str], env: dict[str, str]) -> Any: ...


class BashArgs(ToolArgs):
    """Arguments of ``bash``: ``command``, optional ``timeout_ms`` (1..600 000) and ``description``."""

    command: str = Field(min_length=1, description="The shell command to run (bash -c), in the workspace folder.")
    timeout_ms: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TIMEOUT_MS,
        description=f"Timeout in milliseconds (default {DEFAULT_TIMEOUT_MS}, max {MAX_TIMEOUT_MS}).",
    )
    description: str | None = Field(
        default=None, description="A short description of what the command does (shown to the user)."
    )


class OutputBuffer:
    """Bounded capture of a byte stream: the first ``head`` bytes, the last ``tail`` bytes, and
    the total count. Memory stays under ``head + tail + one chunk`` whatever the stream's size.

    With ``spill_dir``, a stream that outgrows ``head + tail`` is also written, as it arrives, to a
    private spill file there (``spill_path``); call ``close()``. At most ``spill_limit`` bytes
    (the stream's first ones) are written: beyond that the stream is still read (so the writer never
    blocks on a full pipe) but no longer saved — ``spilled`` and ``spill_dropped`` count the bytes
    written and not written (``spill_limit`` 0: no spill file, every byte of such a stream counts as
    dropped).
    ``listener`` (e.g. ``LiveOutput.feed``) sees every piece as it is fed.
    """

    def __init__(self, head: int = HEAD_BYTES, tail: int = TAIL_BYTES, *, spill_dir: Path | None = None,
                 spill_limit: int = SPILL_LIMIT_BYTES, listener: Callable[[bytes], None] | None = None) -> None:
        self._head_limit, self._tail_limit = head, tail
        self._listener = listener
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._spill_dir = spill_dir
        self._spill_limit = max(0, spill_limit)
        self._file: BinaryIO | None = None
        self.spill_path: Path | None = None
        self.spilled = 0
        self._spill_wanted = False  # the stream outgrew head + tail with a spill folder given

    def feed(self, data: bytes) -> None:
        """Add the next piece of the stream."""
        if self._listener is not None:
            self._listener(data)
        if not self._spill_wanted and self._spill_dir is not None and \
                self.total + len(data) > self._head_limit + self._tail_limit:
            self._spill_wanted = True
            if self._spill_limit > 0:
                try:  # until now nothing was dropped: head + tail is the whole stream so far
                    self.spill_path, self._file = open_spill_file(self._spill_dir, name=None)
                    so_far = (bytes(self.head) + bytes(self.tail))[: self._spill_limit]
                    self._file.write(so_far)
                    self.spilled = len(so_far)
                except OSError:
                    self._spill_wanted = False
        if self._file is not None:
            room = self._spill_limit - self.spilled
            if room > 0:
                piece = data[:room]
                self._file.write(piece)
                self.spilled += len(piece)
        self.total += len(data)
        room = self._head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data and self._tail_limit > 0:
            self.tail += data
            if len(self.tail) > self._tail_limit:
                del self.tail[: len(self.tail) - self._tail_limit]

    def close(self) -> None:
        """Close the spill file, if one was opened."""
        if self._file is not None:
            self._file.close()
            self._file = None

    @property
    def spill_dropped(self) -> int:
        """Bytes of a spilled stream that were not saved because of ``spill_limit`` (0 when the
        stream fit in ``head + tail`` or there is no spill folder)."""
        return self.total - self.spilled if self._spill_wanted else 0

    @property
    def omitted(self) -> int:
        """Bytes of the stream that were not kept."""
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        """The kept output as text (invalid UTF-8 replaced), with a line saying how many bytes
        were left out between head and tail."""
        head = bytes(self.head).decode("utf-8", "replace")
        if not self.tail:
            return head
        tail = bytes(self.tail).decode("utf-8", "replace")
        if self.omitted:
            where = ""
            if self.spill_path is not None:
                where = (f"; the first {self.spilled:,} bytes of the output are in {self.spill_path}"
                         if self.spill_dropped else f"; the whole output is in {self.spill_path}")
            return f"{head}\n[… {self.omitted:,} bytes of output omitted{where} …]\n{tail}"
        return head + tail


def _some(paths: list[str]) -> str:
    return ", ".join(paths[:50]) + (f" and {len(paths) - 50} more" if len(paths) > 50 else "")


def _shell(env: dict[str, str]) -> str:
    return shutil.which("bash", path=env.get("PATH")) or shutil.which("bash") or "/bin/sh"


class BashTool(Tool):
    """``bash(command, timeout_ms?, description?)``.

    On ``asyncio`` cancellation the group is killed and ``run`` *returns* a result ("cancelled …;
    output so far") instead of re-raising, after ``Task.uncancel()`` — callers that cancel the
    task get the result from ``await task``.
    """

    name = "bash"
    description = (
        "Run a shell command with bash in the workspace folder and return its combined "
        "stdout+stderr and exit code. No stdin (interactive commands get end-of-file). The command "
        f"is stopped after `timeout_ms` (default {DEFAULT_TIMEOUT_MS // 1000} s, max "
        f"{MAX_TIMEOUT_MS // 1000} s), with its child processes. Under the OS sandbox, background "
        "processes (`&`, `nohup`, `setsid`, daemons) end when the command ends: start a server or "
        "watcher in the same command that uses it. Long output is cut in the middle; "
        "pipe through `head`, `tail` or `grep` to see what matters. Use `read`, `grep`, `glob`, "
        "`edit` and `write` for files instead of cat/sed/echo."
    )
    Args = BashArgs
    kind = "execute"
    concurrency_safe = False
    default_timeout = DEFAULT_TIMEOUT_MS / 1000
    live_output = True

    def timeout(self, args: BashArgs) -> float:
        """``timeout_ms / 1000`` (default 120 s), never more than 600 s."""
        ms = args.timeout_ms if args.timeout_ms is not None else DEFAULT_TIMEOUT_MS
        return min(ms, MAX_TIMEOUT_MS) / 1000

    def title(self, args: BashArgs, ctx: ToolContext) -> str:
        if args.description and args.description.strip():
            return one_line(args.description, 120)
        return f"Run `{one_line(args.command, 100)}`"

    async def execute(self, args: BashArgs, ctx: ToolContext) -> ToolResult:
        env = dict(os.environ if ctx.env is None else ctx.env)
        cwd = ctx.cwd
        if not cwd.is_dir():
            return ToolResult.error(f"The workspace folder {cwd} does not exist; cannot run commands.")
        timeout = self.timeout(args)
        argv = [_shell(env), "-c", args.command]
        launch = ctx.shell_launcher(argv, env) if ctx.shell_launcher is not None else None
        if launch is not None and launch.refuse:
            return ToolResult.error(launch.refuse, sandbox=launch.meta)
        result = await self._run(launch, argv, env, cwd, timeout, ctx)
        if wants_network(launch, result):  # cut off from the network, failed for want of it: asked
            result = await again_with_network(launch, result, lambda again: self._run(again, argv, env, cwd, timeout, ctx))
        if ctx.env_dropped and not ctx.env_dropped_told:  # once a session: what the shell lacks, and why
            ctx.env_dropped_told = True
            result.meta["env_dropped"] = list(ctx.env_dropped)
            result.text += "\n" + dropped_notice(ctx.env_dropped)
        return result

    async def _run(self, launch: Any, argv: list[str], env: dict[str, str], cwd: Path, timeout: float,
                   ctx: ToolContext) -> ToolResult:
        """Start the command (through ``launch`` when there is one), read its output, and make its
        result with what the launch adds (setuid sweep, configuration put back, the sandbox's hint)."""
        if launch is not None:
            argv, env = launch.argv, launch.env
        started = time.monotonic()
        spawn = getattr(launch, "spawn", None)
        try:  # the launcher starts it (same shape: group leader, one output pipe)
            proc = await spawn(cwd, env) if spawn is not None else None
            if proc is None:  # unconfined, no launcher: the whole tree ends with the command (setsid ones too)
                proc = await asyncio.create_subprocess_exec(
                    *reaped(argv),
                    cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                    start_new_session=True,
                )
        except OSError as exc:
            return ToolResult.error(f"Could not start the shell: {exc.strerror or exc}.")
        record = procs.register(ctx.session_dir, proc.pid)  # a later load can stop it if we die
        live = LIVE_OUTPUT.get()  # an editor that shows the output as it comes
        spill_dir = ctx.session_dir / "spill" if ctx.session_dir is not None else None
        spill_limit = ctx.max_spill_bytes
        if spill_dir is not None:  # what is left of the session's spill budget
            spill_limit = min(spill_limit, spill_room(spill_dir, ctx.max_session_spill_bytes))
        buffer = OutputBuffer(spill_dir=spill_dir, spill_limit=spill_limit,
                              listener=live.feed if live is not None else None)
        state: dict[str, Any] = {}
        outcome = "exited"
        try:
            try:
                await asyncio.wait_for(self._pump(proc, buffer, state), timeout=timeout)
            except TimeoutError:
                outcome = "timeout"
        except asyncio.CancelledError:
            outcome = "cancelled"
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        finally:
            if outcome != "exited" or proc.returncode is None:
                cancelled = outcome == "cancelled"
                await terminate_group(proc, grace=CANCEL_GRACE_SECONDS if cancelled else KILL_GRACE_SECONDS)
                assert proc.stdout is not None
                await _drain(proc.stdout, buffer, budget=CANCEL_GRACE_SECONDS if cancelled else 1.0)
        buffer.close()
        procs.release(record)
        cleared: list[str] = []
        after = getattr(launch, "after", None)
        if after is not None and proc.returncode is not None:
            cleared = await asyncio.to_thread(after)
        elapsed = time.monotonic() - started
        transport = getattr(proc, "_transport", None)
        if transport is not None:  # release our end of a pipe an escaped process may still hold
            transport.close()
        result = self._result(proc, buffer, state, outcome, timeout, elapsed, ctx)
        if cleared:
            result.meta["setuid_cleared"] = cleared
            result.text += "\n[sandbox] setuid/setgid bits were removed from: " + ", ".join(cleared)
        reverted = launch.reverted() if getattr(launch, "reverted", None) is not None else []
        if reverted:  # configuration an editor (shell, git) obeys outside the sandbox: put back, then asked
            kept: list[str] = []
            try:
                with awaiting_user():  # the user's time to decide is not the command's
                    kept = await launch.keep(CURRENT_TOOL_CALL.get()) if getattr(launch, "keep", None) else []
            except asyncio.CancelledError:  # the turn was cancelled meanwhile: it stays put back
                if (task := asyncio.current_task()) is not None:
                    task.uncancel()
            result.meta["editor_config_reverted"] = reverted[:1000]
            result.text += ("\n[sandbox] this command created, changed or removed editor or start-up configuration: "
                            f"{_some(reverted)}. Editors (or the user's shell, git, desktop) run or obey these files "
                            "outside the sandbox, so it was put back (where it could be) and the user decides whether "
                            "to keep the command's version")
            if kept:
                result.meta["editor_config_kept"] = kept[:1000]
                result.text += f": the user kept {_some(kept)}" + (" (the rest stays put back)." if set(reverted) - set(kept) else ".")
            else:
                result.text += (": it stays put back. Do not work around this; change such files with the write or "
                                "edit tool, which shows the user the change and asks.")
        if launch is not None:
            result.meta["sandbox"] = launch.meta
            markers = getattr(launch, "hint_markers", None) or PERMISSION_MARKERS
            if launch.failure_hint and any(m in result.text for m in markers):
                result.text += "\n" + launch.failure_hint
        return result

    async def _pump(self, proc: asyncio.subprocess.Process, buffer: OutputBuffer, state: dict[str, Any]) -> None:
        """Read the pipe until EOF and the shell's exit; if the shell exited but a background job
        keeps the pipe open, stop the group after ``DRAIN_SECONDS`` (``state["background_held"]``)."""
        assert proc.stdout is not None
        reader = proc.stdout
        exited = asyncio.ensure_future(wait_exit(proc))
        read: asyncio.Future[bytes] | None = None
        try:
            while True:
                read = asyncio.ensure_future(reader.read(_CHUNK))
                done, _ = await asyncio.wait({read, exited}, return_when=asyncio.FIRST_COMPLETED)
                if read in done:
                    chunk = read.result()
                else:  # the shell exited: give the rest of its output a moment to drain
                    try:
                        chunk = await asyncio.wait_for(read, timeout=DRAIN_SECONDS)
                    except TimeoutError:
                        state["background_held"] = True
                        await terminate_group(proc, grace=0.5)
                        await _drain(reader, buffer)
                        return
                read = None
                if not chunk:
                    await exited
                    return
                buffer.feed(chunk)
        finally:
            for fut in (read, exited):
                if fut is not None and not fut.done():
                    fut.cancel()

    def _result(
        self, proc: asyncio.subprocess.Process, buffer: OutputBuffer, state: dict[str, Any],
        outcome: str, timeout: float, elapsed: float, ctx: ToolContext,
    ) -> ToolResult:
        output = buffer.text()
        meta: dict[str, Any] = {
            "exit_code": proc.returncode, "outcome": outcome,
            "output_bytes": buffer.total, "seconds": round(elapsed, 3),
        }
        if buffer.spill_path is not None:
            meta["spill"] = str(buffer.spill_path)
            meta["spill_bytes"] = buffer.spilled
        if buffer.spill_dropped:
            meta["spill_dropped_bytes"] = buffer.spill_dropped
        lines: list[str] = []
        if outcome == "timeout":
            lines.append(f"Command timed out after {timeout:g} s and was stopped (with its child processes).")
            lines.append("Output so far:" if buffer.total else "It printed nothing.")
        elif outcome == "cancelled":
            lines.append(f"Command cancelled after {elapsed:.1f} s and was stopped (with its child processes).")
            lines.append("Output so far:" if buffer.total else "It printed nothing.")
        if buffer.total:
            lines.append(output.rstrip("\n"))
        elif outcome == "exited":
            lines.append("(no output)")
        if buffer.spill_dropped:
            saved = (f"only its first {buffer.spilled:,} bytes were saved to {buffer.spill_path}"
                     if buffer.spill_path is not None else "none of it was saved to a spill file")
            lines.append(
                f"[the output was {buffer.total:,} bytes; {saved} (spill cap: {ctx.max_spill_bytes:,} bytes per "
                f"command, {ctx.max_session_spill_bytes:,} bytes per session), {buffer.spill_dropped:,} bytes "
                "were dropped; redirect a big output to a file in the workspace or filter it with `head`, "
                "`tail` or `grep`]"
            )
        if state.get("background_held"):
            lines.append(
                "[background processes kept the output open after the command finished and were "
                "stopped; to leave a process running, redirect its output: `cmd > log 2>&1 &`]"
            )
        lines.append(f"exit code: {exit_text(proc.returncode)}")
        ok = outcome == "exited" and proc.returncode == 0
        return ToolResult("\n".join(lines), is_error=not ok, meta=meta)


async def _drain(reader: asyncio.StreamReader, buffer: OutputBuffer, budget: float = 1.0) -> None:
    """Read what is left in the pipe after the group was stopped, for at most ``budget`` seconds
    in all (an escaped process may still hold the pipe open, or keep writing)."""
    deadline = time.monotonic() + budget
    try:
        while (left := deadline - time.monotonic()) > 0:
            chunk = await asyncio.wait_for(reader.read(_CHUNK), timeout=min(left, DRAIN_SECONDS))
            if not chunk:
                return
            buffer.feed(chunk)
    except (TimeoutError, OSError, ValueError):
        pass
