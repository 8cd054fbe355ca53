"""The session's policy: one guard at the pre-execute point of every tool call.

Role: ``SessionPolicy.guard(call)`` decides each call from the mode, the path policy, the shell
analysis and the sandbox status: *allow*, *deny* (the reason becomes the call's result), or
*ask* — then the session's remembered rules answer, or the user does through the ``Approver``.
Every decision is logged as ``policy/decision`` (tool, arguments digest, mode, rule, outcome, who
decided); remembered rules as ``policy/remembered``; the sandbox level once as ``sandbox/status``.

Must never: allow without an explicit allow when it asked (no answer, a timeout, an error, a
cancelled turn → deny), rewrite a call, or let a remembered allow cover a destructive,
compound or secret-touching shell command.
"""

from __future__ import annotations

import asyncio
import json
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from agent_server.config.load import PolicySettings
from agent_server.policy.approvals import (
    ALLOW_ALWAYS, ALLOW_ONCE, NETWORK, OUTSIDE_READS, REJECT_ALWAYS, REJECT_ONCE, Answer, ApprovalMemory, Approver, Ask, Rule, denial_text,
)
from agent_server.policy.editor_config import editor_config_of
from agent_server.policy.git_hooks import HOOK_NAMES, Undeterminable, hook_of, hook_paths
from agent_server.policy.decision import CallView, Denial
from agent_server.policy.modes import ACCEPT_EDITS, DANGER_FULL_ACCESS, READ_ONLY, ModeState
from agent_server.policy.paths import (CredentialStores, SecretMatcher, below_any_case,
                                       existing_ancestors, file_identity, inside_roots, link_count, named_credentials,
                                       secret_patterns_with_history, target, under_any_case)
from agent_server.policy.sandbox.confiner import SandboxStatus, ShellConfiner, probe_status
# policy.shell (the command analysis) loads with the first shell command, in _shell
from agent_server.session import EventLog

Emit = Callable[[dict[str, Any]], Awaitable[None]]
_DIFF_LIMIT = 1_000_000
#: Recent file-tool decisions kept for their opens (``open_refusal``): more than the calls that can
#: run at once (a parallel pool of 4) or wait between their guard and their dispatch.
_DECIDED_KEPT = 256
#: Most changed configuration files one question shows (the rest are counted).
_MAX_SHOWN_CHANGES = 50


@dataclass
class Verdict:
    """What the rules say about one call before anyone is asked.

    ``outcome``: ``allow``/``deny``/``ask``; ``rule``: the rule that decided; ``reason``: the denial
    text, or why it asks; ``title``/``content``/``what``: for the question; ``prefix``: the shell
    prefix a rule may remember (``None``: per tool); ``exact``: an ``allow_always`` remembers the
    whole command, not ``prefix`` (no enforced sandbox, or a command that runs code from its
    arguments); ``rememberable``: ``*_always`` is offered;
    ``memory_allows``: a remembered allow may answer; ``facts``: extra data for the log.
    """

    outcome: str
    rule: str
    reason: str = ""
    title: str = ""
    what: str = "this call"
    content: list[dict[str, Any]] = field(default_factory=list)
    prefix: str | None = None
    exact: str | None = None
    rememberable: bool = True
    memory_allows: bool = True
    facts: dict[str, Any] = field(default_factory=dict)


class SessionPolicy:
    """Policy of one session.

    ``log``: the session log; ``roots``: absolute workspace roots; ``settings``: ``[policy]``;
    ``modes``: the live mode; ``approver``: asks the user; ``emit``: ACP session updates (to tell
    the user once that the sandbox is incomplete); ``status``: the sandbox status if known
    (else probed on first use); ``tmpdir``: the shell's per-session temp folder.
    """

    def __init__(self, log: EventLog, roots: Sequence[Path], settings: PolicySettings, modes: ModeState,
                 approver: Approver, emit: Emit, tmpdir: Path, status: SandboxStatus | None = None) -> None:
        self.log = log
        self.roots = tuple(Path(r) for r in roots)
        self.settings = settings
        self.modes = modes
        self.approver = approver
        self.emit = emit
        self.memory = ApprovalMemory()
        self.ask_edits = False
        """Ask before every file change inside the roots (the plain-ACP path, where the editor
        cannot preview a proposal: the permission question, with the diff, is the review)."""
        self.secrets = SecretMatcher(secret_patterns_with_history(settings.secret_patterns),
                                     exact=named_credentials(self.roots))
        """Files that may hold secrets: by name or path pattern, and those the user's set-up names
        (``$GOOGLE_APPLICATION_CREDENTIALS``, ``$KUBECONFIG``, ssh's ``IdentityFile`` …: protected too,
        ``CredentialStores``; as secrets, a shell command naming one asks)."""
        self.protected: CredentialStores | None = None
        """Places no file tool opens in any mode (config, state, keyrings, ~/.ssh …): set by the
        server, which knows the config and state folders."""
        self.status: SandboxStatus | None = None
        started = log.events[0].time if len(log) else None  # the session's start, also after a load
        self.shell_launcher = ShellConfiner(modes, status or SandboxStatus(settings.sandbox), self.roots, tmpdir, settings,
                                            int(started * 1e9) if started is not None else None)
        self._told_user = False
        self._decided: dict[str, str] = {}
        """The resolved path each recent allowed file-tool call was judged on, by its
        ``tool_call_id`` (``open_refusal``); the newest ``_DECIDED_KEPT``."""
        self.shell_launcher.ask_keep = self._keep_editor_config
        self.shell_launcher.network_allowed = self._network_remembered
        self.shell_launcher.ask_network = self._ask_network
        self._told_network = False
        if status is not None:
            self._set_status(status)

    def release(self) -> None:
        """The session is closed: its shell confiner lets go of this policy (its ``ask_keep``, a
        bound method of ours: a reference cycle, which kept the session and its whole log in memory
        until a garbage collection — ``continuity.let_go``'s full one — found it)."""
        self.shell_launcher.ask_keep = None
        self.shell_launcher.network_allowed = None
        self.shell_launcher.ask_network = None

    def _set_status(self, status: SandboxStatus) -> None:
        self.status = status
        self.shell_launcher.status = status
        data = status.as_data()  # logged when it changed: loading an unchanged session appends nothing
        logged = self.log.latest("sandbox/status")  # kept by the log: no walk of a long one
        if (logged.data if logged is not None else None) != data:
            self.log.append("sandbox/status", data)

    async def ensure_status(self) -> SandboxStatus:
        """The sandbox status, probed (and logged) the first time it is needed."""
        if self.status is None:
            self._set_status(await probe_status(self.settings))
        assert self.status is not None
        return self.status

    @property
    def sandboxed(self) -> bool | None:
        """Whether shell commands of the current mode run confined (``None`` while unknown)."""
        if self.status is None:
            return None
        if self.modes.current == DANGER_FULL_ACCESS:
            return False
        return self.status.read_confinable if self.modes.current == READ_ONLY else self.status.write_confinable

    # -- the guard ------------------------------------------------------------------------------

    async def guard(self, call: CallView) -> Denial | None:
        """The pipeline guard: ``None`` lets the call run, a ``Denial`` is its result."""
        if call.tool is None or call.args is None:
            return None
        verdict = await self.evaluate(call)
        answer: Answer | None = None
        rule: Rule | None = None
        if verdict.outcome == "ask":
            rule = self._remembered(call.name, verdict)
            if rule is None:
                failed = await _precondition(call)
                if failed is not None:  # the call cannot succeed: nobody is asked about it
                    self._log(call, verdict, "deny", "precondition",
                              extra={"precondition": failed.meta.get("refused") or "failed"})
                    return Denial(failed.text, result=failed)
                try:
                    answer = await self.approver.ask(self._question(call, verdict))
                except asyncio.CancelledError:
                    self._log(call, verdict, "deny", "fail-closed:turn-cancelled")
                    raise
                self._remember(call, verdict, answer)
        if rule is not None:
            allowed, decided_by = rule.allow, f"remembered: {rule.describe()}"
        elif answer is not None:
            allowed, decided_by = answer.allowed, answer.decided_by
        else:
            allowed, decided_by = verdict.outcome == "allow", "policy"
        self._log(call, verdict, "allow" if allowed else "deny", decided_by, answer)
        if allowed and isinstance(verdict.facts.get("resolved"), str):
            self._decided[getattr(call, "tool_call_id", call.call_id)] = verdict.facts["resolved"]
            while len(self._decided) > _DECIDED_KEPT:  # the oldest first (dicts keep their order)
                del self._decided[next(iter(self._decided))]
        if allowed:
            if verdict.rule == "secret-read" and "command" in verdict.facts:
                self.shell_launcher.allow_secrets_once(verdict.facts["command"])  # this exact command only
            return None
        if rule is not None:
            return Denial(f"Rejected by the user: {verdict.what} matches a rule the user set earlier in this "
                          f"session ({rule.describe()}). It did not run.")
        if answer is not None:
            return Denial(denial_text(answer, verdict.what, self.settings.approval_timeout))
        return Denial(verdict.reason)

    def _remembered(self, tool: str, verdict: Verdict) -> Rule | None:
        tool = verdict.facts.get("mcp_identity", tool)  # an MCP tool by what it is, not its exposed name
        if "outside_folder" in verdict.facts:  # a read outside the roots: the folders allowed or rejected
            resolved = verdict.facts["resolved"]
            rule = self.memory.lookup(OUTSIDE_READS, lambda p: under_any_case(resolved, p))
        elif "mcp_arguments" in verdict.facts and verdict.prefix is not None:  # exact arguments only
            rule = self.memory.lookup(tool, lambda p: p == verdict.prefix)
        elif "command" in verdict.facts:  # shell rules are per prefix or exact; a compound command matches none
            command = verdict.facts["command"]
            from agent_server.policy.shell import prefix_matches  # loaded by _shell already

            rule = self.memory.lookup(tool, lambda p: prefix_matches(p, command), command=command)
        else:
            rule = self.memory.lookup(tool)
        if rule is not None and rule.allow and not verdict.memory_allows:
            return None
        return rule

    def _remember(self, call: CallView, verdict: Verdict, answer: Answer) -> None:
        if answer.kind != "selected" or answer.option not in (ALLOW_ALWAYS, REJECT_ALWAYS) or not verdict.rememberable:
            return
        allow = answer.option == ALLOW_ALWAYS
        tool = OUTSIDE_READS if "outside_folder" in verdict.facts else verdict.facts.get("mcp_identity", call.name)
        if allow and verdict.exact is not None:  # a reject may stay broad; an allow must not
            rule = Rule(tool, verdict.exact, True, exact=True)
        else:
            rule = Rule(tool, verdict.prefix, allow)
        self.memory.remember(rule)
        self.log.append("policy/remembered", {"tool": rule.tool, "prefix": rule.prefix, "allow": rule.allow,
                                              "exact": rule.exact, "call_id": call.call_id,
                                              "rule": rule.describe()})

    def _question(self, call: CallView, verdict: Verdict) -> Ask:
        """The question for ``call``: the tool call's own title and locations (clients keep the
        permission's title as the call's title), the verdict's content (diff, command) first — clients
        that show only the first block must show the diff — then the reason for asking as a
        plain-words text block."""
        title = _plain(getattr(call, "title", "") or verdict.title)  # a tool's name may hold a newline
        reason = verdict.reason
        if reason.startswith("destructive: "):
            reason = f"it is destructive ({reason.removeprefix('destructive: ')})"
        why = f"agent-server asks before {verdict.what or 'this call'} because {reason}." if reason else ""
        if self.memory.rules:
            why += f" Remembered for this session: {self.memory.summary()}."
        content = list(verdict.content) + ([_text(why.strip())] if why.strip() else [])
        options = (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS) if verdict.rememberable else (ALLOW_ONCE, REJECT_ONCE)
        names: tuple[tuple[str, str], ...] = ()
        if "outside_folder" in verdict.facts:
            folder = _plain(verdict.facts["outside_folder"], 300)
            names = ((ALLOW_ALWAYS, f"Always allow reading in {folder}"),
                     (REJECT_ALWAYS, f"Always reject reading in {folder}"))
        return Ask(getattr(call, "tool_call_id", call.call_id), title, call.tool.kind, content,
                   _raw_input(call), options, names=names, locations=list(getattr(call, "locations", ()) or ()))

    def _log(self, call: CallView, verdict: Verdict, outcome: str, decided_by: str, answer: Answer | None = None,
             extra: dict[str, Any] | None = None) -> None:
        data: dict[str, Any] = {
            "call_id": call.call_id, "tool": call.name,
            "arguments_sha256": hashlib.sha256(call.raw_arguments.encode()).hexdigest(),
            "mode": self.modes.current, "rule": verdict.rule, "outcome": outcome, "decided_by": decided_by,
        }
        if verdict.reason:
            data["reason"] = verdict.reason
        if answer is not None:
            data["answer"] = {"kind": answer.kind, "option": answer.option, "detail": answer.detail}
        data.update(verdict.facts)
        data.update(extra or {})
        self.log.append("policy/decision", data)

    async def _ask_logged(self, question: Ask, base: dict[str, Any]) -> Answer:
        """Ask ``question`` outside the guard (a command's after-questions) and log its ``policy/decision``
        (``base`` + the outcome; a cancelled turn's question is a denial, logged, and the cancel goes on)."""
        try:
            answer = await self.approver.ask(question)
        except asyncio.CancelledError:
            self.log.append("policy/decision", {**base, "outcome": "deny", "decided_by": "fail-closed:turn-cancelled"})
            raise
        self.log.append("policy/decision", {**base, "outcome": "allow" if answer.allowed else "deny",
                                            "decided_by": answer.decided_by,
                                            "answer": {"kind": answer.kind, "option": answer.option,
                                                       "detail": answer.detail}})
        return answer

    async def _keep_editor_config(self, tool_call_id: str | None, changes: list[Any]) -> bool:
        """A confined command created, changed or removed editor configuration below the roots
        (``editor_config.ConfigWatch``), which was put back: ask the user whether to keep the
        command's version (``True``: they said so). What could not be put back or kept is said in
        the question, or — when nothing can be kept — in a notice to the user. Logged as
        ``policy/decision`` (or ``policy/notice``)."""
        from agent_server.policy.editor_config import MISSING

        content: list[dict[str, Any]] = []
        shown_changes = changes[:_MAX_SHOWN_CHANGES]  # thousands of planted files: one bounded question
        for change in shown_changes:
            where = _plain(change.path, 500)
            if change.keepable and isinstance(change.after, tuple) and change.after[0] == "link":
                content.append(_text(f"{where}: the command made it a link to {_plain(change.after[1], 500)}."))
            elif change.keepable:
                old = _shown(change.before)
                content.append({"type": "diff", "path": change.path, "oldText": old,
                                "newText": "" if change.after == MISSING else _shown(change.after)})
                if change.after == MISSING:
                    content.append(_text(f"{where}: removed by the command."))
            else:
                content.append(_text(f"{where}: changed by the command, and it cannot be shown or kept (a special "
                                     "file, or a file too big to keep)" + ("; it was put back." if change.put_back else
                                     "; it could NOT be put back: look at it before your editor opens this folder.")))
            if change.saved:
                content.append(_text(f"{where} could not be put back (a folder on its way was replaced); your "
                                     f"version is saved at {change.saved}."))
        paths = [c.path for c in changes]
        names = ", ".join(_plain(p, 500) for p in paths[:_MAX_SHOWN_CHANGES])
        if len(changes) > _MAX_SHOWN_CHANGES:
            more = len(changes) - _MAX_SHOWN_CHANGES
            names += f" and {more} more"
            content.append(_text(f"… and {more} more files, not shown (each was put back where it could be)."))
        base = {"call_id": tool_call_id, "tool": "bash", "mode": self.modes.current, "rule": "editor-config-shell",
                "paths": paths[:1000], "count": len(paths)}
        if not any(c.keepable for c in changes):
            text = " ".join(c["content"]["text"] for c in content if c["type"] == "content")
            self.log.append("policy/notice", {**base, "text": text})
            await self.emit({"sessionUpdate": "agent_message_chunk",
                             "content": {"type": "text", "text": f"\n[agent-server] A shell command changed editor "
                                                                 f"configuration: {text}\n"},
                             "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})
            return False
        content.append(_text(f"agent-server asks because a shell command changed editor or start-up configuration "
                             f"({names}), which your editor, shell, git or desktop runs or obeys on its own, outside "
                             "the sandbox (a settings file can choose a binary; a task, devcontainer, exrc or shell "
                             "rc file runs commands). It was put back; keep the command's version only if you want it."))
        question = Ask(tool_call_id or "", "Keep the configuration this command changed?", "edit", content,
                       {"paths": paths[:_MAX_SHOWN_CHANGES], "count": len(paths)}, (ALLOW_ONCE, REJECT_ONCE),
                       names=((ALLOW_ONCE, "Keep the command's version"), (REJECT_ONCE, "Leave it put back")),
                       locations=[{"path": p} for p in paths[:_MAX_SHOWN_CHANGES]])
        answer = await self._ask_logged(question, base)
        return answer.allowed

    def _network_remembered(self, command: str) -> bool:
        """Whether the user said "Always allow the network" for ``command``'s prefix this session."""
        from agent_server.policy.shell import prefix_matches

        rule = self.memory.lookup(NETWORK, lambda p: prefix_matches(p, command), command=command)
        return rule is not None and rule.allow

    async def _ask_network(self, tool_call_id: str | None, command: str, output: str) -> bool:
        """``network = "ask"``: a confined command ran cut off from the network and failed as if it
        needed it; ask whether to run it again with the network (``True``: allowed). "Always" is
        offered for a command with a prefix (not a compound one) and remembered for it; a remembered
        reject answers without asking. Logged as ``policy/decision`` rule ``network-retry``."""
        from agent_server.policy.shell import command_prefix, prefix_matches

        prefix = command_prefix(command)
        base = {"call_id": tool_call_id, "tool": "bash", "mode": self.modes.current, "rule": "network-retry",
                "command": command}
        rule = self.memory.lookup(NETWORK, lambda p: prefix_matches(p, command), command=command)
        if rule is not None and not rule.allow:
            self.log.append("policy/decision", {**base, "outcome": "deny", "decided_by": f"remembered: {rule.describe()}"})
            return False
        tail = "\n".join(output.strip().splitlines()[-8:])
        shown = _plain(_one_line(command))
        content = [_text(_fenced(command, "sh")),
                   _text(f"It ran in the sandbox without the network and failed as if it needed it:\n{_fenced(tail)}"),
                   _text("agent-server asks because with the network a command can send whatever it can read — your "
                         "files outside the workspace that are not hidden (tokens under ~/.config, browser profiles) — "
                         "to any server. Run it again with the network only if you expect it to need it (installing "
                         "packages, fetching, pushing). What the first run changed stays.")]
        names = [(ALLOW_ONCE, "Run again with the network"), (REJECT_ONCE, "Keep the network off")]
        options: tuple[str, ...] = (ALLOW_ONCE, REJECT_ONCE)
        if prefix is not None:
            options = (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS)
            names += [(ALLOW_ALWAYS, f"Always allow the network for `{_plain(prefix, 80)}`"),
                      (REJECT_ALWAYS, f"Never the network for `{_plain(prefix, 80)}`")]
        question = Ask(tool_call_id or "", f"Run `{shown}` again with the network?", "execute", content,
                       {"command": command}, options, names=tuple(names))
        answer = await self._ask_logged(question, base)
        if answer.kind == "selected" and answer.option in (ALLOW_ALWAYS, REJECT_ALWAYS) and prefix is not None:
            remembered = Rule(NETWORK, prefix, answer.option == ALLOW_ALWAYS)
            self.memory.remember(remembered)
            self.log.append("policy/remembered", {"tool": NETWORK, "prefix": prefix, "allow": remembered.allow,
                                                  "exact": False, "call_id": tool_call_id,
                                                  "rule": remembered.describe()})
        return answer.allowed

    async def _tell_network_once(self, status: SandboxStatus) -> None:
        """The session's first confined command has the network (``network = true``, or a machine
        where it cannot be cut): say so once, and how to cut it."""
        if self._told_network or self.shell_launcher.network_for("") is False:
            return
        self._told_network = True
        from agent_server.policy.sandbox.confiner import network_mode

        why = ("`[policy] network = true`" if network_mode(self.settings) == "on" else
               "the network cannot be cut on this machine")
        text = (f"Shell commands run in the sandbox with the network ({why}): a command can send whatever it can read "
                "— files outside the workspace that are not hidden, such as tokens under ~/.config — to any server. "
                "Set `network = \"ask\"` in `[policy]` to run them without it and be asked when one needs it.")
        self.log.append("policy/notice", {"rule": "network", "text": text, "sandbox": status.as_data()})
        await self.emit({"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": f"\n[agent-server] {text}\n"},
                         "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})

    # -- the rules ------------------------------------------------------------------------------

    async def evaluate(self, call: CallView) -> Verdict:
        """The rules' verdict for ``call`` (no one is asked here)."""
        name, args, kind = call.name, call.args, call.tool.kind
        mcp = getattr(call.tool, "mcp", None)
        if mcp is not None:
            return self._mcp(name, mcp, args, call.tool)
        if name == "bash":
            return await self._shell(args.command)
        path = getattr(args, "path", None)
        if kind in ("edit", "delete", "move"):
            if isinstance(path, str):
                return self._write(name, args, path)
            if self.modes.current == READ_ONLY:
                return Verdict("deny", "read-only", f"Refused: the session is in read-only mode, so {name} may not run.")
            return Verdict("ask", "unknown-change", "a tool that changes files without a path policy can check",
                           title=f"Run {name}", what=f"this {name} call")
        if kind in ("read", "search"):
            return self._read(name, path if isinstance(path, str) else None)
        if kind in ("think", "switch_mode"):
            return Verdict("allow", "no-effect")
        if self.modes.current == DANGER_FULL_ACCESS and kind == "fetch":
            return Verdict("allow", "danger-full-access")
        return Verdict("ask", f"unknown-{kind}", "a tool whose effects policy cannot check",
                       title=f"Run {name}", what=f"this {name} call")

    def _mcp(self, name: str, mcp: Any, args: Any, tool: Any = None) -> Verdict:
        """MCP servers run outside our sandbox and their annotations are untrusted unless the user's
        config trusts the server: an untrusted server's call asks every time (in every mode) with
        its arguments shown, and "always allow" covers these exact arguments only; a trusted
        server's ``readOnlyHint`` tool runs (not in read-only mode's ask), ``destructiveHint`` always
        asks, others ask once per tool."""
        arguments = json.dumps(args.model_dump(), sort_keys=True, ensure_ascii=False)
        facts = {"mcp_server": mcp.server, "mcp_tool": mcp.tool, "mcp_arguments": arguments, "trusted": mcp.trusted,
                 "mcp_identity": _mcp_identity(mcp, tool)}
        server, tool_name = _plain(mcp.server), _plain(mcp.tool)
        shown = [_text(f"MCP server `{server}`, tool `{tool_name}`, arguments:\n{arguments}")]
        title = f"Run {tool_name} ({server} MCP server)"
        what = f"this call of {tool_name} on the {server} MCP server"
        if mcp.read_only:
            return Verdict("allow", "mcp-trusted-read-only", facts=facts)
        if not mcp.trusted:
            return Verdict("ask", "mcp-untrusted", "MCP servers run outside the sandbox", title=title, what=what,
                           content=shown, prefix=arguments, facts=facts)
        if mcp.destructive:
            return Verdict("ask", "mcp-destructive", "the server marks this tool destructive", title=title,
                           what=what, content=shown, rememberable=False, memory_allows=False, facts=facts)
        return Verdict("ask", "mcp-trusted", "MCP servers run outside the sandbox", title=title, what=what,
                       content=shown, facts=facts)

    def _read(self, tool: str, path: str | None) -> Verdict:
        if path is None:
            return Verdict("allow", "workspace")  # the first root
        t = target(path, self.roots)
        facts: dict[str, Any] = {"path": str(t.lexical), "resolved": str(t.resolved)}
        if denied := self._protected(tool, path, t):
            return denied
        verb = "Read" if tool == "read" else "Search"
        secret = self.secrets.match(t.lexical, t.resolved)
        if secret is not None:
            return Verdict("ask", "secret-read", f"it may hold secrets (matches `{secret}`)",
                           title=f"{verb} {t.lexical}", what=f"reading {t.lexical}",
                           facts={**facts, "secret_pattern": secret},
                           content=[_text(f"{verb} {t.lexical}: the file matches the secret pattern `{secret}`.")])
        if inside_roots(t.resolved, self.roots, resolved=True):  # one resolution decides
            return Verdict("allow", "workspace", facts=facts)  # the fast path: no question inside the roots
        if self.modes.current == DANGER_FULL_ACCESS:
            return Verdict("allow", "danger-full-access", facts={**facts, "inside_roots": False})
        if self._read_allowed(t.resolved):
            return Verdict("allow", "read-allowed", facts={**facts, "inside_roots": False})
        folder = t.resolved if os.path.isdir(t.resolved) else t.resolved.parent
        shown = f" ({t.resolved})" if t.resolved != t.lexical else ""
        return Verdict("ask", "outside-read", (
            f"{t.lexical}{shown} lies outside the workspace ({', '.join(str(r) for r in self.roots)}); what a file "
            "tool reads is sent to the model"),
            title=f"{verb} {t.lexical}", what=f"reading {t.lexical}", prefix=str(folder),
            content=[_text(f"{verb} {t.lexical}{' — a link to ' + str(t.resolved) if shown else ''}: outside the "
                           "workspace.")],
            facts={**facts, "inside_roots": False, "outside_folder": str(folder)})

    def open_refusal(self, tool_call_id: str | None, kind: str, resolved: str) -> str | None:
        """Why a file tool's open of ``resolved`` (every link followed, at the open) for the call
        ``tool_call_id`` is not what this policy decided (``None``: it is). The guard judged one
        resolution of the call's path; a link swapped in after it would carry the open elsewhere —
        outside the roots, to a secret, into ``.git`` — with nobody asked. So the open must reach
        the path the decision was made on; a call decided without a path (``grep`` of the first
        root) may read only what a read reads unasked (inside the roots, not a secret). No call in
        progress (``None``: undo, attachments, the server's own reads): no decision to keep."""
        if tool_call_id is None:
            return None
        decided = self._decided.get(tool_call_id)
        if decided is not None:
            if resolved == decided or (kind == "list" and resolved == os.path.dirname(decided)):
                return None  # ("list": the names of the folder of a path that was not found)
            return f"it now leads to {resolved}, not to {decided}, where it led when it was allowed"
        if kind in ("read", "list") and self.secrets.match(resolved) is None and self.reads_unasked(Path(resolved)):
            return None
        return f"it leads to {resolved}, which this call was not allowed to {'read' if kind == 'read' else 'change'}"

    def reads_unasked(self, resolved: Path) -> bool:
        """Whether the file tools read ``resolved`` (every link followed) with no question about
        where it lies: inside the roots, in ``danger-full-access``, or where ``_read_allowed`` says."""
        return (inside_roots(resolved, self.roots, resolved=True) or self.modes.current == DANGER_FULL_ACCESS
                or self._read_allowed(resolved))

    def _read_allowed(self, resolved: Path) -> bool:
        """``resolved`` lies in ``[policy] read_allowed``, this session's temp folder or its spill
        folder (the model reads its own spilled outputs back)."""
        text = str(resolved)
        places = [self.shell_launcher.tmpdir, self.shell_launcher.spill_dir, *self.settings.read_allowed]
        return any(under_any_case(text, os.path.realpath(os.path.expanduser(str(p)))) for p in places)

    def _write(self, tool: str, args: Any, path: str) -> Verdict:
        t = target(path, self.roots)
        inside = inside_roots(t.lexical, self.roots)
        facts: dict[str, Any] = {"path": str(t.lexical), "resolved": str(t.resolved), "inside_roots": inside}
        if (links := link_count(t.resolved)) > 1:
            facts["links"] = links  # a hard link may point outside: a known limit, made visible
        if denied := self._protected(tool, path, t):
            return denied
        mode = self.modes.current
        if mode == READ_ONLY:
            return Verdict("deny", "read-only", (
                f"Refused: the session is in read-only mode, so nothing may be written ({path} was not changed). "
                "Describe the change instead, or ask the user to switch the session to workspace-write."), facts=facts)
        if mode != DANGER_FULL_ACCESS and not inside:
            roots = ", ".join(str(r) for r in self.roots)
            return Verdict("deny", "workspace-boundary", (
                f"Refused: {path} resolves to {t.resolved}, which is outside the workspace ({roots}). In "
                f"{mode} mode writes are only allowed inside the workspace roots; only the user can "
                "allow more, by switching the session to danger-full-access."), facts=facts)
        if mode != DANGER_FULL_ACCESS and self._in_git_dir(t.resolved):
            return Verdict("deny", "git-read-only", (
                f"Refused: {path} is inside a `.git` folder, which is read-only in {mode} mode (hooks and "
                "refs there would run or rewrite history behind the user's back). Only the user can allow this, "
                "by switching the session to danger-full-access."), facts=facts)
        secret = self.secrets.match(t.lexical, t.resolved)
        if secret is None and (hook := self._git_hook(t)) is not None:
            return Verdict("ask", "git-hook", (
                f"{hook} is run (or read as configuration) by git or a hook manager on the user's next git "
                "command, outside the sandbox"),
                title=f"{'Edit' if tool == 'edit' else 'Write'} {t.lexical}", what=f"writing {t.lexical}",
                content=[_diff(t.lexical, tool, args)], rememberable=False, memory_allows=False,
                facts={**facts, "git_hook": hook})
        if secret is None and (editor := editor_config_of(t.resolved, t.lexical, self.roots)
                               or self._home_startup(t.resolved)) is not None:
            return Verdict("ask", "editor-config", (
                f"{editor} is editor configuration that your editor runs or obeys outside the sandbox (a "
                "settings file can choose the agent's own server binary, a task or exrc file runs commands)"),
                title=f"{'Edit' if tool == 'edit' else 'Write'} {t.lexical}", what=f"writing {t.lexical}",
                content=[_diff(t.lexical, tool, args)], rememberable=False, memory_allows=False,
                facts={**facts, "editor_config": editor})
        rule = {DANGER_FULL_ACCESS: "danger-full-access", ACCEPT_EDITS: "accept-edits"}.get(mode, "workspace")
        if secret is None and self.ask_edits and mode != ACCEPT_EDITS:  # accept-edits: no review, asked or not
            return Verdict("ask", "plain-acp-edit", "this editor cannot show the change as a proposal to "
                           "accept or reject, so this question (with the diff) is your review",
                           title=f"{'Edit' if tool == 'edit' else 'Write'} {t.lexical}", what=f"writing {t.lexical}",
                           content=[_diff(t.lexical, tool, args)], facts=facts)
        if secret is None:
            return Verdict("allow", rule, facts=facts)
        return Verdict("ask", "secret-write", f"it may hold secrets (matches `{secret}`)",
                       title=f"{'Edit' if tool == 'edit' else 'Write'} {t.lexical}", what=f"writing {t.lexical}",
                       content=[_diff(t.lexical, tool, args)], facts={**facts, "secret_pattern": secret})

    def _home_startup(self, resolved: Path) -> str | None:
        """``resolved`` when it is a start-up file of the home folder (or in one of its start-up
        folders) and the home folder lies in a root (``ConfigIndex.home_files``), else ``None``."""
        index = self.shell_launcher.config_index
        text = str(resolved)
        if any(under_any_case(text, f) for f in index.home_files + index.home_folders):
            return text  # in any case, as every protected path (a case-folding filesystem)
        return None

    def _protected(self, tool: str, path: str, t: Any) -> Verdict | None:
        reason = self.protected.match(t.lexical, t.resolved) if self.protected is not None else None
        if reason is None:
            return None
        return Verdict("deny", "credential-store", (
            f"Refused: `{tool}` may not open {path}: {reason}. No file tool opens it in any mode; do not try to "
            "reach it another way."), facts={"path": str(t.lexical), "resolved": str(t.resolved)})

    def _git_hook(self, t: Any) -> str | None:
        """The protected git hook path ``t`` is or lies in (``git_hooks``); when the set cannot be
        told, a path named like a hook manager's file still counts."""
        bases = list(self.roots)
        nested = _nested_top(t.resolved, self.roots)
        if nested is not None:  # a repository nested below a root: its own hooks count the same
            bases.append(nested)
        paths: list[str] = []
        for base in bases:
            try:
                paths += hook_paths([base], all_names=True)
            except Undeterminable:
                paths += [str(Path(os.path.realpath(base)) / n) for n in HOOK_NAMES]
        return hook_of(t.resolved, t.lexical, paths)

    def _in_git_dir(self, resolved: Path) -> bool:
        """``resolved`` is, or lies in, a ``.git`` of a root or of a repository nested below one
        (any ``.git`` component inside the roots: git runs the hooks and obeys the config there).
        In any case (``.GIT/hooks``: a case-folding filesystem opens it as ``.git/hooks``), and by
        identity: an existing folder of ``resolved``'s path that *is* a root's ``.git`` under
        another spelling (Unicode-ignorable characters on HFS+, a short 8.3 name) counts too."""
        text = str(resolved)
        gits: set[tuple[int, int]] = set()
        for root in self.roots:
            git = os.path.realpath(root / ".git")
            if under_any_case(text, git):
                return True
            rel = below_any_case(text, os.path.realpath(root))
            if rel is not None and any(part.casefold() == ".git" for part in rel.split("/")):
                return True
            if (ident := file_identity(git)) is not None:
                gits.add(ident)
        return bool(gits) and any(file_identity(a) in gits for a in existing_ancestors(resolved))

    async def _shell(self, command: str) -> Verdict:
        from agent_server.policy.shell import command_prefix, destructive_reason, runs_code_from_arguments

        status = await self.ensure_status()
        mode = self.modes.current
        destructive = destructive_reason(command)
        secret = self._shell_secret(command)
        prefix = command_prefix(command)
        facts: dict[str, Any] = {"command": command, "sandbox": status.level}
        base = dict(title=f"Run `{_one_line(command)}`", what="this command",
                    content=[_text(_fenced(command, "sh"))], facts=facts)
        rememberable = prefix is not None and secret is None
        if mode != DANGER_FULL_ACCESS and status.filesystem and \
                (overflow := await asyncio.to_thread(self.shell_launcher.secret_overflow)):
            return Verdict("ask", "secret-overflow", overflow, rememberable=False, memory_allows=False,
                           prefix=prefix, **base)
        if mode == READ_ONLY:
            if status.read_confinable:
                await self._tell_network_once(status)
                return Verdict("allow", "sandbox-read-only", **base)
            if not status.filesystem:
                return Verdict("deny", "read-only-unconfinable", (
                    "Refused: the session is read-only and no OS sandbox can confine the shell to reading here, "
                    "so shell commands cannot run. Use read, grep and glob instead."), **base)
        if destructive:
            return Verdict("ask", "destructive", f"destructive: {destructive}", rememberable=False,
                           memory_allows=False, prefix=prefix, **base)
        if secret:
            return Verdict("ask", "secret-read", f"it names a secret file (matches `{secret}`)", rememberable=False,
                           memory_allows=False, prefix=prefix, **base)
        if mode == DANGER_FULL_ACCESS:
            return Verdict("allow", "danger-full-access", **base)
        if mode != READ_ONLY and status.write_confinable:
            try:
                hook_paths(self.roots)
            except Undeterminable as exc:  # git may run what this command plants: as without a sandbox
                return Verdict("ask", "git-hooks-unknown", (
                    f"the git hooks this repository runs cannot be determined ({exc}), so the sandbox cannot keep "
                    "them read-only"), rememberable=False, memory_allows=False, prefix=prefix, **base)
            await self._tell_network_once(status)
            return Verdict("allow", "sandbox", **base)
        await self._tell_user_once(status)
        # Without an enforced sandbox an allow covers this exact command only; under a (partial)
        # sandbox, so does one for a command that can run code from its arguments (awk, sed e …).
        runner = runs_code_from_arguments(command)
        exact = command if (not status.filesystem or runner is not None) else None
        if exact is not None:
            facts["remember"] = "exact" + (f" ({runner} runs code from its arguments)" if status.filesystem else "")
        return Verdict("ask", "no-sandbox", "no OS sandbox confines the shell here", prefix=prefix, exact=exact,
                       rememberable=rememberable, **base)

    def _shell_secret(self, command: str) -> str | None:
        from agent_server.policy.shell import path_words

        for word in path_words(command):
            t = target(os.path.expandvars(word), self.roots)
            found = self.secrets.match(t.lexical, t.resolved)
            if found:
                return found
        return None

    async def _tell_user_once(self, status: SandboxStatus) -> None:
        if self._told_user:
            return
        self._told_user = True
        text = status.user_text()
        self.log.append("policy/notice", {"text": text, "sandbox": status.as_data()})
        await self.emit({"sessionUpdate": "agent_message_chunk",
                         "content": {"type": "text", "text": f"\n[agent-server] {text}\n"}, "_meta": {"agentServer": {"notice": {"severity": "warning"}}}})


def _nested_top(resolved: Path, roots: Sequence[Path]) -> Path | None:
    """The top of the repository nested below a root that ``resolved`` lies in (the nearest
    folder above it holding a ``.git``, strictly below the root), else ``None``."""
    for root in roots:
        base = Path(os.path.realpath(root))
        if base not in resolved.parents:
            continue
        for folder in resolved.parents:
            if folder == base:
                return None
            if os.path.lexists(folder / ".git"):
                return folder
    return None


async def _precondition(call: CallView) -> Any:
    """The tool's own error for ``call`` if it cannot succeed (``None``: it may; or no check)."""
    check = getattr(call, "precondition", None)
    return await check() if check is not None else None


def _mcp_identity(mcp: Any, tool: Any) -> str:
    """What a remembered MCP rule is about: the server, the tool's own name, a hash of its input
    schema and description, and its hints — a renamed exposed name, a changed schema or a tool that
    became ``destructiveHint`` is another tool to ask about (issue 32 §8)."""
    import hashlib

    schema = tool.schema().get("function", {}) if tool is not None and hasattr(tool, "schema") else {}
    hints = {k: mcp.annotations.get(k) for k in ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")}
    digest = hashlib.sha256(json.dumps([schema.get("parameters"), schema.get("description"), hints],
                                       sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
    return "mcp:" + json.dumps([mcp.server, mcp.tool, digest], ensure_ascii=False)


def _plain(text: str, limit: int = 200) -> str:
    """``text`` on one line as it can be trusted in a title: control, format and line-separator
    characters escaped (a newline in a tool's name spoofed the question's title), cut at ``limit``."""
    import unicodedata

    out = "".join(f"\\u{ord(c):04x}" if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c for c in text)
    return out if len(out) <= limit else out[:limit] + "…"


def _shown(state: Any) -> str | None:
    """A kept file's bytes as the question's text (invalid UTF-8 replaced); ``None`` for anything
    else (missing, a link)."""
    return state[0].decode("utf-8", "replace") if isinstance(state, tuple) and isinstance(state[0], bytes) else None


def _text(text: str) -> dict[str, Any]:
    return {"type": "content", "content": {"type": "text", "text": text}}


def _fenced(code: str, info: str = "") -> str:
    """``code`` in a markdown code block whose fence is longer than any backtick run inside it (a
    line of three backticks in a command must not end the block)."""
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{code}\n{fence}"


def _one_line(command: str, limit: int = 100) -> str:
    first = command.strip().splitlines()[0] if command.strip() else ""
    return first if len(first) <= limit and "\n" not in command.strip() else first[: limit - 1] + "…"


def _raw_input(call: CallView) -> Any:
    try:
        return call.args.model_dump(mode="json", exclude_none=True)
    except Exception:  # noqa: BLE001 - display only
        return {"arguments": call.raw_arguments}


def _diff(path: Path, tool: str, args: Any) -> dict[str, Any]:
    """ACP diff content for a write/edit question (whole file where it can be read)."""
    old: str | None = None
    try:
        if path.is_file() and path.stat().st_size <= _DIFF_LIMIT:
            old = path.read_bytes().decode("utf-8", "replace")
    except OSError:
        old = None
    if tool == "write":
        return {"type": "diff", "path": str(path), "oldText": old, "newText": args.content}
    if old is not None and args.old_string in old:
        new = old.replace(args.old_string, args.new_string, -1 if args.replace_all else 1)
        return {"type": "diff", "path": str(path), "oldText": old, "newText": new}
    return {"type": "diff", "path": str(path), "oldText": args.old_string, "newText": args.new_string}
