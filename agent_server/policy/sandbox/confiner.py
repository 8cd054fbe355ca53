"""The shell sandbox as the server sees it: what is really enforceable here, and how a command
is launched under it.

Role: ``probe_status(settings)`` finds out — by *testing* in a throwaway child
(``sandbox_exec --probe``), once per process — what the OS enforces: Landlock filesystem rules,
read-only ``.git`` (a private mount namespace), a PID namespace per command (nothing outlives the
call), hidden credentials and secret files (masks), refused setuid/setgid bits (seccomp), and, with
``network = false``, a private network namespace (TCP, UDP, abstract sockets) plus refused
``socket(AF_UNIX)``; in both network modes, Landlock's scopes (ABI ≥ 6): no abstract unix socket and
no process outside the sandbox can be reached (reported, not required: older kernels lack them). ``SandboxStatus`` reports it (logged as ``sandbox/status``; told to the user
once when it is not complete).

Must never: report a protection as enforced that the probe did not see enforced, or run a
command unconfined in ``read-only`` mode (it refuses instead).

``ShellConfiner`` is the ``bash`` tool's launcher: in
``workspace-write`` (and ``accept-edits``) the command runs through ``sandbox_exec`` with write access only to the roots,
the session's temp folder (its ``TMPDIR``) and ``/dev/null`` + the terminal; in ``read-only`` only
to the temp folder; in ``danger-full-access`` unconfined. Under the sandbox the shell does not see
the config file, the state folder (but the session's own spill and temp folders), keyrings,
``~/.ssh`` and the like (``shell_masks.credential_paths``), nor files inside the roots named like a
secret (``.env*`` …, any case) or named by a credential-path variable (``$GOOGLE_APPLICATION_CREDENTIALS``
…) — unless the user allowed that exact command (``allow_secrets_once``). After
each confined command, setuid/setgid bits in the roots are swept (``ShellLaunch.after``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from agent_server.config.load import PolicySettings
from agent_server.policy.modes import ACCEPT_EDITS, DANGER_FULL_ACCESS, READ_ONLY, WORKSPACE_WRITE, ModeState
from agent_server.policy.paths import secret_patterns_with_history
from agent_server.policy.editor_config import PLACEHOLDERS, Change, ConfigIndex, ConfigWatch, editor_config_paths
from agent_server.policy.git_hooks import Undeterminable, hook_paths, read_only_paths
from agent_server.policy.sandbox.shell_masks import (MAX_SECRET_FILES, SecretScanner, SetuidSweeper, credential_paths,
                                                     named_credential_paths)

# sandbox_exec (the wrapper, with ctypes) and shell_spawn (the launcher) load with the first confined
# command, not with the server (tests/server/test_lazy_imports.py)

log = logging.getLogger("agent_server.policy")

EXEC_WRAPPER = Path(__file__).with_name("sandbox_exec.py")
DEVICES = ("/dev/null", "/dev/tty", "/dev/pts", "/dev/ptmx")
#: Longest ``--spec`` argument passed inline (Linux allows 128 KiB per argument).
SPEC_ARG_LIMIT = 64 * 1024
_PROBED: dict[tuple[str, bool], "SandboxStatus"] = {}
_PROBING: dict[tuple[str, bool], tuple[asyncio.AbstractEventLoop, "asyncio.Task[SandboxStatus]"]] = {}
"""The probe running now per key, with the loop it runs on (a finished or foreign one is replaced)."""


@dataclass(frozen=True)
class SandboxStatus:
    """What the shell sandbox enforces on this machine.

    ``setting``: ``auto`` or ``off``; ``abi``: Landlock ABI (0: none); ``filesystem``: write
    confinement verified; ``git_read_only``: read-only ``.git`` verified; ``network_wanted``:
    the ``network`` setting; ``network_blocked``: TCP and UDP blocking (a private network
    namespace) and refused ``socket(AF_UNIX)`` verified (``None``: not needed); ``problems``: why
    something is missing; ``pid_namespace``: each command runs in its own PID namespace with a
    fresh ``/proc``; ``masks``: credentials and secret files can be hidden; ``setuid_blocked``:
    setuid/setgid mode bits are refused (seccomp); ``abstract_unix_blocked``: abstract unix
    sockets bound outside the sandbox (X11, a D-Bus bus at an abstract address) cannot be reached,
    with ``network`` too (Landlock ABI ≥ 6); ``signals_scoped``: Landlock refuses signals to
    processes outside the sandbox (ABI ≥ 6; the PID namespace hides them as well);
    ``network_asks``: ``network = "ask"`` with the cut verified — commands run without the network
    and one that fails as if it needed it asks to run again with it.
    """

    setting: str
    abi: int = 0
    filesystem: bool = False
    git_read_only: bool = False
    network_wanted: bool = True
    network_blocked: bool | None = None
    problems: tuple[str, ...] = ()
    pid_namespace: bool = False
    masks: bool = False
    setuid_blocked: bool = False
    abstract_unix_blocked: bool = False
    signals_scoped: bool = False
    network_asks: bool = False

    @property
    def network_ok(self) -> bool:
        """The network setting is honoured (allowed, or blocked as asked)."""
        return self.network_wanted or bool(self.network_blocked)

    @property
    def namespaces(self) -> bool:
        """The namespace-based protections all work (PID namespace, masks, read-only ``.git``)."""
        return self.pid_namespace and self.masks and self.git_read_only

    @property
    def write_confinable(self) -> bool:
        """``workspace-write`` shells are fully confined: commands need no approval."""
        return self.filesystem and self.namespaces and self.setuid_blocked and self.network_ok

    @property
    def read_confinable(self) -> bool:
        """``read-only`` shells can be confined read-only."""
        return self.filesystem and self.network_ok

    @property
    def level(self) -> str:
        """``landlock`` (everything enforced), ``partial`` or ``none``."""
        return "landlock" if self.write_confinable else ("partial" if self.filesystem else "none")

    def as_data(self) -> dict[str, Any]:
        """The ``sandbox/status`` event data."""
        return {"level": self.level, "setting": self.setting, "landlock_abi": self.abi,
                "filesystem": self.filesystem, "git_read_only": self.git_read_only,
                "pid_namespace": self.pid_namespace, "masks": self.masks, "setuid_blocked": self.setuid_blocked,
                "network": ("asked per command (cut by default)" if self.network_asks else "allowed" if self.network_wanted
                            else ("blocked" if self.network_blocked else "NOT blocked")),
                "unix_sockets": ("path sockets reachable (network allowed)" if self.network_wanted else
                                 "refused" if self.network_blocked else "NOT refused"),
                "abstract_unix_sockets": "refused" if self.abstract_unix_blocked else "NOT refused",
                "signals_outside": "refused" if self.signals_scoped else "NOT refused by Landlock",
                "problems": list(self.problems)}

    def user_text(self) -> str:
        """One sentence for the user when the sandbox is not complete ('' when it is)."""
        if self.write_confinable:
            return ""
        why = "; ".join(self.problems) or "unknown reason"
        return (f"The shell sandbox is not fully enforceable here ({why}), so every shell command will ask "
                "for your approval before it runs.")


@dataclass(frozen=True)
class ShellLaunch:
    """How ``bash`` should start one command (the shape ``tools.bash`` expects of a launcher).

    ``argv``/``env``: what to execute; ``refuse``: run nothing and return this error instead;
    ``failure_hint``: appended to a command's output when it shows one of ``hint_markers`` (a
    permission error, or a refused connection when the network is blocked);
    ``meta``: logged with the result (sandbox level, mode, network); ``after``: called (in a
    worker thread) once the command and everything it started have ended — returns the paths
    whose setuid/setgid bits it cleared; ``spawn``: ``await spawn(cwd, env)`` starts the command
    through the long-lived launcher (``shell_spawn``) instead of executing ``argv`` — confined: the
    same confinement, without a Python start-up per command; unconfined: its whole tree ended with
    it, as under ``tools/mcp/reaper.py`` (``None``: the launcher is unavailable, ``bash`` runs
    ``argv`` itself).
    """

    argv: list[str]
    env: dict[str, str]
    refuse: str | None = None
    failure_hint: str | None = None
    hint_markers: tuple[str, ...] = ()
    meta: dict[str, Any] = field(default_factory=dict)
    after: Callable[[], list[str]] | None = None
    spawn: Callable[[Path, dict[str, str]], Awaitable[Any]] | None = None
    reverted: Callable[[], list[str]] | None = None
    """After ``after``: the editor configuration below the roots the command created, changed or
    removed, put back (``editor_config.ConfigWatch``)."""
    keep: Callable[[str | None], Awaitable[list[str]]] | None = None
    """After ``reverted``: ``await keep(tool_call_id)`` asks the user whether to keep the command's
    version of what was put back, makes it again if they say so, and returns the paths kept."""
    network_retry: Callable[[str | None, str], Awaitable["ShellLaunch | None"]] | None = None
    """``network = "ask"``, the command ran cut off: when it failed showing one of
    ``network_markers``, ``await network_retry(tool_call_id, output)`` asks the user whether to run
    it again with the network and gives that launch (``None``: no)."""
    network_markers: tuple[str, ...] = ()


PERMISSION_MARKERS = ("Permission denied", "Read-only file system", "Operation not permitted", "EACCES", "EROFS")
NETWORK_MARKERS = ("Couldn't connect", "Failed to connect", "Connection refused", "connect to", "Network is unreachable",
                   "unable to access", "Could not resolve", "Temporary failure in name resolution", "ConnectionError")
#: What a command cut off from the network prints when it failed for want of it (curl, wget, git,
#: pip, npm, cargo, go, Python, Node, ssh …: a name that does not resolve, an unreachable network, a
#: refused socket): ``network = "ask"`` then asks to run it again with the network.
NETWORK_FAILURES = NETWORK_MARKERS + (
    "Could not resolve host", "Name or service not known", "nodename nor servname", "getaddrinfo", "EAI_AGAIN",
    "ENOTFOUND", "ENETUNREACH", "ECONNREFUSED", "Failed to establish a new connection", "NameResolutionError",
    "Network unreachable", "No address associated with hostname", "Could not connect", "Failed to fetch",
    "dial tcp", "Address family not supported", "Name resolution", "failed to lookup address", "network is unreachable",
    "Temporary failure resolving", "unable to resolve", "Cannot assign requested address")


def network_mode(settings: PolicySettings) -> str:
    """``[policy] network`` as ``"on"``, ``"off"`` or ``"ask"``."""
    return "ask" if settings.network == "ask" else ("on" if settings.network is True else "off")


def off_status(settings: PolicySettings, reason: str) -> SandboxStatus:
    """A status with nothing enforced, for ``reason``."""
    return SandboxStatus(settings.sandbox, network_wanted=network_mode(settings) != "off", problems=(reason,))


def known_status(settings: PolicySettings) -> SandboxStatus | None:
    """The status when no probe is needed (switched off, not Linux, or probed already), else ``None``."""
    if settings.sandbox == "off":
        return off_status(settings, 'the sandbox is switched off (sandbox = "off" / AGENT_SERVER_SANDBOX=off)')
    if not sys.platform.startswith("linux"):
        return off_status(settings, "Landlock needs Linux")
    return _PROBED.get((settings.sandbox, settings.network))


def start_probe(settings: PolicySettings) -> "asyncio.Future[SandboxStatus]":
    """Start the probe for ``settings`` in the background — or join the one already running — and
    return its future without waiting (call it on the running loop). Its result is cached per
    process like ``probe_status``'s; a status that needs no probe is returned as a done future.
    """
    loop = asyncio.get_running_loop()
    known = known_status(settings)
    if known is not None:
        done: asyncio.Future[SandboxStatus] = loop.create_future()
        done.set_result(known)
        return done
    key = (settings.sandbox, settings.network)
    running = _PROBING.get(key)
    if running is None or running[0] is not loop or running[1].done():
        running = _PROBING[key] = (loop, loop.create_task(_probe(settings)))
    return running[1]


async def probe_status(settings: PolicySettings) -> SandboxStatus:
    """Test what the sandbox enforces (cached per process and per ``network`` setting). Joins a
    probe ``start_probe`` already began; a caller cancelled while waiting leaves it running."""
    known = known_status(settings)
    if known is not None:
        return known
    return await asyncio.shield(start_probe(settings))


async def stop_probes() -> None:
    """Cancel the probes still running on this loop (at shutdown) and wait for them to end."""
    loop = asyncio.get_running_loop()
    for key, (owner, task) in list(_PROBING.items()):
        if owner is loop:
            _PROBING.pop(key, None)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)


def _probe_args(settings: PolicySettings, base: str) -> list[str]:
    args = [sys.executable, "-I", "-S", "-B", str(EXEC_WRAPPER), "--probe", base]
    if network_mode(settings) == "on":  # "ask" is probed cut: that is how its commands start
        args.append("--network")
    return args


async def _probe(settings: PolicySettings) -> SandboxStatus:
    base = tempfile.mkdtemp(prefix="agent-server-probe-")
    proc = None
    try:
        # its own process group: a kill of the server's group lets it end and remove its folder
        proc = await asyncio.create_subprocess_exec(*_probe_args(settings, base), stdout=asyncio.subprocess.PIPE,
                                                    process_group=0, stderr=asyncio.subprocess.PIPE,
                                                    stdin=asyncio.subprocess.DEVNULL)
        out, err = await asyncio.wait_for(proc.communicate(), timeout=20)
        report = json.loads(out.decode().strip().splitlines()[-1])
    except (OSError, ValueError, IndexError, asyncio.TimeoutError) as exc:
        log.warning("sandbox probe failed: %s", exc)
        return off_status(settings, f"the sandbox probe failed ({exc})")
    finally:
        if proc is not None and proc.returncode is None:  # timed out, or the server stops: not left running
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                pass
        shutil.rmtree(base, ignore_errors=True)
    return _keep(settings, _status_of(settings, report))


def _keep(settings: PolicySettings, status: SandboxStatus) -> SandboxStatus:
    _PROBED[(settings.sandbox, settings.network)] = status
    return status


def _status_of(settings: PolicySettings, report: dict[str, Any]) -> SandboxStatus:
    """The status a probe's ``report`` shows for ``settings``."""
    problems = list(report.get("errors", []))
    if report.get("abi", 0) < 1:
        problems.insert(0, "Landlock is not available on this kernel")
    elif not report.get("filesystem"):
        problems.append("Landlock did not confine writes in the probe")
    if report.get("filesystem") and not report.get("git_read_only"):
        problems.append("`.git` cannot be made read-only (no private mount namespace)")
    if report.get("filesystem") and not report.get("pid_namespace"):
        problems.append("commands cannot run in their own PID namespace (background processes could outlive them)")
    if report.get("filesystem") and not report.get("masks"):
        problems.append("credentials and secret files cannot be hidden from the shell")
    if report.get("filesystem") and not report.get("setuid_blocked"):
        problems.append("setuid/setgid bits cannot be refused (no seccomp filter for this machine)")
    network = network_mode(settings)
    blocked = None if network == "on" else bool(report.get("network_blocked") and report.get("unix_blocked"))
    if network == "off" and not blocked:
        problems.append("network = false cannot be enforced (needs Landlock ABI 4, a network namespace and seccomp)")
    if network == "ask" and not blocked:
        problems.append('network = "ask" cannot cut the network here (needs Landlock ABI 4, a network namespace and '
                        "seccomp): commands have it")
    if report.get("filesystem") and not report.get("abstract_unix_blocked"):
        problems.append("abstract unix sockets outside the sandbox (X11, a D-Bus bus at an abstract address) are "
                        f"reachable (needs Landlock ABI 6; this kernel has {report.get('abi', 0)})")
    status = SandboxStatus(settings.sandbox, int(report.get("abi", 0)), bool(report.get("filesystem")),
                           bool(report.get("git_read_only")), network == "on" or (network == "ask" and not blocked),
                           blocked, tuple(problems), bool(report.get("pid_namespace")), bool(report.get("masks")),
                           bool(report.get("setuid_blocked")), bool(report.get("abstract_unix_blocked")),
                           bool(report.get("signals_scoped")), network == "ask" and bool(blocked))
    return status


def _unconfined(argv: list[str]) -> Callable[[Path, dict[str, str]], Awaitable[Any]]:
    """The ``spawn`` of an unconfined launch: through the long-lived launcher, whose child kills
    whatever the command left when it ends (``None`` from it: the launcher is unavailable)."""
    async def spawn(cwd: Path, env: dict[str, str]) -> Any:
        from agent_server.policy.sandbox.shell_spawn import spawn_unconfined

        return await spawn_unconfined(argv, env, str(cwd))
    return spawn


def session_tmpdir(session_dir: Path | None) -> Path:
    """The session's private temp folder (``<session>/tmp``, mode 0700), created if needed."""
    path = session_dir / "tmp" if session_dir is not None else Path(tempfile.mkdtemp(prefix="agent-server-tmp-"))
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path


class ShellConfiner:
    """The ``bash`` launcher of one session (``ToolContext.shell_launcher``).

    ``modes``: the session's live mode; ``status``: what the sandbox enforces; ``roots``: the
    workspace roots; ``tmpdir``: the session's temp folder (``<session>/tmp``; its sibling
    ``spill`` stays readable); ``settings``: policy settings; ``since_ns``: the session's start (secret files older than it are
    hidden first). Calling it with ``(argv, env)``
    returns the ``ShellLaunch`` to run.
    """

    def __init__(self, modes: ModeState, status: SandboxStatus, roots: Sequence[Path], tmpdir: Path,
                 settings: PolicySettings, since_ns: int | None = None) -> None:
        self.modes = modes
        self.status = status
        self.roots = [Path(os.path.realpath(r)) for r in roots]
        self.tmpdir = Path(os.path.realpath(tmpdir))
        self.spill_dir = self.tmpdir.parent / "spill"
        self.settings = settings
        self.scanner = SecretScanner(settings.secret_patterns, since_ns)
        self.sweeper = SetuidSweeper()
        self._unmasked: list[str] = []
        self.config_index = ConfigIndex(self.roots)
        self.ask_keep: Callable[[str | None, list[Change]], Awaitable[bool]] | None = None
        """Asks the user whether to keep editor configuration a confined command changed (set by
        the session's policy; ``None``: nobody is asked, it stays put back)."""
        self.network_allowed: Callable[[str], bool] | None = None
        """``network = "ask"``: whether the user always allowed the network for this command's
        prefix (set by the session's policy; ``None``: never)."""
        self.ask_network: Callable[[str | None, str, str], Awaitable[bool]] | None = None
        """``network = "ask"``: ``await ask_network(tool_call_id, command, output)`` asks the user
        whether to run a command that failed without the network again with it (``None``: nobody
        is asked, it stays cut)."""

    def config_watch(self) -> ConfigWatch:
        """A watch over the session's editor-configuration index."""
        return ConfigWatch(self.config_index)

    def secret_overflow(self) -> str | None:
        """Why the masks cannot hide every secret file that existed before the session (more than
        ``MAX_SECRET_FILES``, or too many to list), else ``None``."""
        if not (self.status.pid_namespace and self.status.masks):
            return None
        self.scanner.scan(self.roots)
        if not self.scanner.overflow:
            return None
        return (f"more files named like secrets ({', '.join(self.scanner.names)}) are in the workspace than the "
                f"sandbox can hide (at most {MAX_SECRET_FILES}, those older than this session first), so this "
                "command could read some of them")

    def allow_secrets_once(self, command: str) -> None:
        """The user allowed ``command``, which names a secret file: its next launch is not masked."""
        self._unmasked.append(command)

    def _writable(self, mode: str) -> list[str]:
        writable = [str(self.tmpdir)]
        if mode != READ_ONLY:
            writable = [str(r) for r in self.roots] + writable
            writable += [os.path.realpath(os.path.expanduser(p)) for p in self.settings.sandbox_writable]
        return writable

    def network_for(self, command: str) -> bool:
        """Whether ``command`` starts with the network: ``network = true``, a network that cannot be
        cut here, or (``"ask"``) a prefix the user always allowed."""
        network = network_mode(self.settings)
        if network == "on" or not self.status.network_blocked:
            return True
        return network == "ask" and self.network_allowed is not None and self.network_allowed(command)

    def spec(self, mode: str, secrets_visible: bool = False, network: bool | None = None) -> dict[str, Any]:
        """The ``sandbox_exec`` spec for ``mode`` (only what the probe verified is requested);
        ``network``: the command's (``None``: ``network = true``, or one that cannot be cut)."""
        writable = self._writable(mode)
        ro_binds: list[str] = []
        if mode != READ_ONLY and self.status.git_read_only:
            for root in self.roots:
                git = Path(os.path.realpath(root / ".git"))
                if git.exists() and any(git == r or r in git.parents for r in self.roots):
                    ro_binds.append(str(git))
            ro_binds += editor_config_paths(self.roots)  # missing ones get a placeholder at spawn
            try:  # what git and the hook managers run later, outside the sandbox
                hooks = read_only_paths(hook_paths(self.roots), self.roots)
            except Undeterminable:
                hooks = []  # the policy asks about every command then
            ro_binds += [h for h in hooks if h not in ro_binds and not any(h.startswith(b + "/") for b in ro_binds)]
        if network is None:
            network = network_mode(self.settings) == "on" or not self.status.network_blocked
        namespaces = self.status.pid_namespace and self.status.masks
        spec: dict[str, Any] = {"read": ["/"], "write": writable, "devices": list(DEVICES), "ro_binds": ro_binds,
                                "network": network, "drop_caps": True, "namespaces": namespaces,
                                "seccomp": self.status.setuid_blocked}
        if namespaces:
            try:
                self.spill_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            except OSError:
                pass
            masks = credential_paths(secret_patterns_with_history(self.settings.secret_patterns))
            masks += [m for m in named_credential_paths(self.roots) if m not in masks]  # protected: always hidden
            if not secrets_visible:
                masks += [m for m in self.scanner.scan(self.roots) if m not in masks]
            spec.update(masks=masks, keep=[str(r) for r in self.roots] + writable, keep_ro=[str(self.spill_dir)])
            from agent_server.policy.sandbox.sandbox_notify import SHELL_RECORD

            record = SHELL_RECORD.get()
            if record:  # the command's own writes, recorded by its PID 1 (sandbox_notify)
                spec["evidence"] = record
        return spec

    def __call__(self, argv: list[str], env: dict[str, str], network: bool | None = None) -> ShellLaunch:
        mode = self.modes.current
        if mode == ACCEPT_EDITS:  # only the file tools' review differs: the shell is workspace-write's
            mode = WORKSPACE_WRITE
        command = argv[-1] if argv else ""
        secrets_visible = command in self._unmasked
        if secrets_visible:
            self._unmasked.remove(command)
        if mode == DANGER_FULL_ACCESS:
            return ShellLaunch(argv, env, meta={"sandbox": "none", "mode": mode}, spawn=_unconfined(argv))
        if not self.status.filesystem:
            if mode == READ_ONLY:
                return ShellLaunch(argv, env, refuse=(
                    "Refused: the session is read-only and no OS sandbox can confine the shell to reading "
                    "here, so shell commands cannot run. Use read, grep and glob instead."),
                    meta={"sandbox": "none", "mode": mode})
            return ShellLaunch(argv, env, meta={"sandbox": "none", "mode": mode, "approved": True},
                               spawn=_unconfined(argv))
        given_env = dict(env)
        if network is None:
            network = self.network_for(command)
        spec = self.spec(mode, secrets_visible, network)
        env = {**env, "TMPDIR": str(self.tmpdir), "TMP": str(self.tmpdir), "TEMP": str(self.tmpdir)}
        agent = self._keep_ssh_agent_out(env, spec)
        spec_arg = self._spec_arg(spec)
        wrapped = [sys.executable, "-I", "-S", "-B", str(EXEC_WRAPPER), "--spec", spec_arg, "--", *argv]

        held: list[str] = []
        watch = (ConfigWatch(self.config_index, self.tmpdir.parent / "put-back")
                 if mode != READ_ONLY and spec["ro_binds"] else None)
        put_back: list[str] = []

        async def spawn(cwd: Path, env: dict[str, str]) -> Any:
            from agent_server.policy.sandbox.shell_spawn import ConfinedProcess, spawn_confined

            nonlocal spec_arg
            if watch is not None:  # what a mount cannot hold: looked at before, put back after
                await asyncio.to_thread(watch.snapshot)
                extra = await asyncio.to_thread(self._nested_git_binds, spec["ro_binds"])
                if extra:  # repositories nested below the roots: their .git and hooks, read-only too
                    spec["ro_binds"] = spec["ro_binds"] + extra
                    spec_arg = self._spec_arg(spec)
                    wrapped[wrapped.index("--spec") + 1] = spec_arg
            held[:] = PLACEHOLDERS.acquire(spec["ro_binds"])
            try:
                proc = await spawn_confined(argv, env, str(cwd), spec, wrapped)
            except BaseException:
                PLACEHOLDERS.release(held)
                raise
            if spec_arg.startswith("@") and isinstance(proc, ConfinedProcess):
                try:  # the wrapper did not run: its spec file is ours to remove
                    os.unlink(spec_arg[1:])
                except OSError:
                    pass
            return proc

        markers = PERMISSION_MARKERS + (() if spec["network"] else NETWORK_MARKERS)
        sweep_roots = list(spec["write"])
        skip = list(spec["ro_binds"])
        meta = {"sandbox": f"landlock-{mode}", "mode": mode, "network": spec["network"],
                "git_read_only": any(p.endswith("/.git") for p in spec["ro_binds"]),
                "editor_config_read_only": bool(spec["ro_binds"]), "pid_namespace": spec["namespaces"],
                "masked": len(spec.get("masks", [])), "secrets_visible": secrets_visible}
        if agent:
            meta["ssh_agent"] = agent
        def after() -> list[str]:
            PLACEHOLDERS.release(held)
            if watch is not None:
                put_back[:] = watch.restore()
            return self.sweeper(sweep_roots, skip)

        async def keep(tool_call_id: str | None) -> list[str]:
            if watch is None or not watch.changes or self.ask_keep is None:
                return []
            offered = [c for c in watch.changes if c.keepable]
            if not await self.ask_keep(tool_call_id, list(watch.changes)) or not offered:
                return []
            return await asyncio.to_thread(watch.reapply, offered)

        retry = None
        if not spec["network"] and self.status.network_asks and self.ask_network is not None:
            async def retry(tool_call_id: str | None, output: str) -> ShellLaunch | None:
                """Ask to run the command again with the network; the launch to do it, or ``None``."""
                if self.ask_network is None or not await self.ask_network(tool_call_id, command, output):
                    return None
                if secrets_visible:  # the user's allow of a command naming a secret covers its second run
                    self._unmasked.append(command)
                return self(argv, given_env, network=True)
            meta["network"] = "cut (asks to run again with it)"

        return ShellLaunch(wrapped, env, failure_hint=self._hint(mode, spec), hint_markers=markers, meta=meta,
                           after=after, spawn=spawn, reverted=lambda: list(put_back), keep=keep,
                           network_retry=retry, network_markers=NETWORK_FAILURES if retry is not None else ())

    def _keep_ssh_agent_out(self, env: dict[str, str], spec: dict[str, Any]) -> str:
        """Keep the user's ssh-agent from a confined command (in place): no ``SSH_AUTH_SOCK`` (nor
        ``SSH_AGENT_PID``) in ``env``, and the socket it names masked in the command's mount
        namespace, so a command that finds the path (``/tmp/ssh-*/agent.*``) cannot connect either
        (with the network on, path sockets are reachable) — unless ``[policy] shell_env_allow``
        names ``SSH_AUTH_SOCK``. Returns what ``meta`` says: ``"passed"``, ``"masked"``,
        ``"not passed"`` (no masks here: the variable alone is left out), or ``""`` (none set)."""
        socket_path = env.get("SSH_AUTH_SOCK", "")
        if not socket_path:
            return ""
        if "SSH_AUTH_SOCK" in self.settings.shell_env_allow:
            return "passed"
        env.pop("SSH_AUTH_SOCK", None)
        env.pop("SSH_AGENT_PID", None)
        real = os.path.realpath(socket_path)
        if "masks" in spec and os.path.isabs(real) and os.path.lexists(real):
            if real not in spec["masks"]:
                spec["masks"].append(real)
            return "masked"
        return "not passed"

    def _nested_git_binds(self, binds: list[str]) -> list[str]:
        """What to bind read-only for the repositories nested below the roots (the index's last
        look): each ``.git`` (a folder, or a link file and the folder it names inside the roots) and
        what their configuration makes git run from their trees (``git_hooks.hook_paths``) — a
        user's next ``git commit`` there runs it outside the sandbox, as at the root."""
        gits = self.config_index.nested_gits
        if not gits:
            return []
        roots = [str(r) for r in self.roots]

        def inside(path: str) -> bool:
            return any(path == r or path.startswith(r + "/") for r in roots)

        found: list[str] = []
        for git in gits:
            real = os.path.realpath(git)
            if inside(real):
                found.append(real)
            if os.path.isfile(git):  # "gitdir: PATH" (a worktree or a submodule's checkout)
                try:
                    with open(git, encoding="utf-8", errors="replace") as handle:
                        line = handle.read(4096).strip()
                except OSError:
                    line = ""
                if line.startswith("gitdir:"):
                    target = os.path.realpath(os.path.join(os.path.dirname(git), line[len("gitdir:"):].strip()))
                    if inside(target):
                        found.append(target)
        tops = [os.path.dirname(g) for g in gits]
        try:
            found += read_only_paths(hook_paths(tops), tops)
        except Undeterminable:
            pass  # the nested repository's own configuration is unreadable: its .git is still held
        out: list[str] = []
        for path in sorted(set(found)):
            held = [*binds, *out]
            if path in held or any(path.startswith(b.rstrip("/") + "/") for b in held):
                continue
            out.append(path)
        return out

    def _spec_arg(self, spec: dict[str, Any]) -> str:
        """The ``--spec`` argument; a spec longer than ``SPEC_ARG_LIMIT`` (many masked files) goes
        through a private file beside the temp folder (``@PATH``; the wrapper deletes it)."""
        from agent_server.policy.sandbox.sandbox_exec import encode_spec

        encoded = encode_spec(spec)
        if len(encoded) <= SPEC_ARG_LIMIT:
            return encoded
        fd, path = tempfile.mkstemp(prefix="sandbox-spec-", dir=self.tmpdir.parent)
        with os.fdopen(fd, "w", encoding="ascii") as handle:
            handle.write(encoded)
        return "@" + path

    def _hint(self, mode: str, spec: dict[str, Any]) -> str:
        if mode == READ_ONLY:
            where = f"only in its temp folder {self.tmpdir}"
            way_out = "The session is read-only: ask the user to switch to workspace-write to make changes."
        else:
            where = "only inside " + ", ".join(str(r) for r in self.roots) + f" and its temp folder {self.tmpdir}"
            way_out = ("Work inside the workspace, or ask the user to switch the session to danger-full-access "
                       "if this really must write elsewhere (git commits too).")
        git = ("; `.git` is read-only (no commits, branch or index changes), and so are the editors' configuration "
               "in the workspace roots (.vscode, .idea, .zed, .nvim.lua, .nvimrc, .exrc …) and what git runs from the "
               "tree (the core.hooksPath folder, .husky, .pre-commit-config.yaml, lefthook files, included git config, "
               "driver scripts): change those with the write or edit tool, which asks the user") if spec["ro_binds"] else ""
        abstract = ("; abstract unix sockets outside the sandbox (X11, a D-Bus bus at an abstract address) are not"
                    if self.status.abstract_unix_blocked else " and so are abstract ones (X11, a D-Bus bus at an abstract address)")
        cut = ("cut off (no TCP, UDP or unix sockets; a command that fails for want of it is offered to the user to "
               "run again with it)" if self.status.network_asks else "off (no TCP, UDP or unix sockets)")
        net = (f"; the network is {cut}" if not spec["network"] else
               "; the network is on, so path sockets (docker.sock) are reachable — not the user's ssh-agent "
               "(SSH_AUTH_SOCK is left out and its socket hidden)" + abstract)
        masked = ("; stored credentials (~/.ssh, ~/.aws, the agent's config and state …) and files named like "
                  "secrets (" + ", ".join(p for p in self.settings.secret_patterns if "/" not in p) + ") are "
                  "hidden: naming one in a command asks the user" if spec.get("masks") is not None else "")
        setuid = "; setuid/setgid bits are refused" if spec.get("seccomp") else ""
        refused = "error above is" + (" (or a failed connection is)" if not spec["network"] else "")
        return (f"[sandbox] This command ran under the OS sandbox ({mode}): it may write {where}{git}{net}"
                f"{masked}{setuid}. A 'Permission denied' or 'Read-only file system' {refused} the sandbox "
                f"refusing. {way_out}")
