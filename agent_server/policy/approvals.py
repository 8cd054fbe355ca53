"""Approvals: what policy asks the user, what an answer means, and what is remembered.

Role: ``Ask`` is one question (title, ACP content, the options offered); an ``Approver`` (the
server's ``PermissionRequester``) turns it into an ``Answer``; ``Answer.allowed`` is ``True`` only
for an explicit allow (invariant 11) and ``denial_text`` tells the model *which* way it was not
allowed — rejected by the user, cancelled, timed out, no one could be asked, a failed or invalid
answer are different texts. ``ApprovalMemory`` keeps the session's ``allow_always`` /
``reject_always`` rules, per tool and, for the shell, per command prefix or per exact command
(``Rule.exact``: an allow without an enforced sandbox, or for a command that can run code from its
arguments — see ``shell.runs_code_from_arguments``).

Must never: treat anything but a selected allow option as consent, or remember a rule for a
call that cannot be remembered (compound or destructive shell commands, secret-file commands).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS = "allow_once", "allow_always", "reject_once", "reject_always"
#: The ``Rule.tool`` of remembered answers about file-tool reads outside the roots (``prefix``: the
#: folder they cover, links resolved) — one rule for ``read``, ``grep`` and ``glob`` alike.
OUTSIDE_READS = "reads outside the workspace"
#: The ``Rule.tool`` of remembered answers about running a shell command again with the network
#: (``network = "ask"``; ``prefix``: the command prefix they cover).
NETWORK = "network for shell commands"
OPTION_NAMES = {ALLOW_ONCE: "Allow once", ALLOW_ALWAYS: "Always allow", REJECT_ONCE: "Reject",
                REJECT_ALWAYS: "Always reject"}

AnswerKind = Literal["selected", "cancelled", "timeout", "error", "malformed", "unknown_option", "unavailable"]


@dataclass(frozen=True)
class Ask:
    """One permission question.

    ``tool_call_id``: the editor's id of the call; ``title``: what the user reads; ``kind``: the
    ACP tool kind; ``content``: ACP ``ToolCallContent`` (a diff for edits, the command for shell);
    ``raw_input``: the call's arguments; ``options``: option ids offered (each is also its kind);
    ``locations``: the call's ACP ``ToolCallLocation`` list (absolute paths).
    """

    tool_call_id: str
    title: str
    kind: str
    content: list[dict[str, Any]]
    raw_input: Any
    options: tuple[str, ...] = (ALLOW_ONCE, ALLOW_ALWAYS, REJECT_ONCE, REJECT_ALWAYS)
    names: tuple[tuple[str, str], ...] = ()
    """Option names other than the usual ones (``((option id, name), …)``), e.g. "Keep mine"."""
    locations: list[dict[str, Any]] = field(default_factory=list)
    kinds: tuple[tuple[str, str], ...] = ()
    """The ACP kind of an option whose id is none of the four kinds (``((option id, kind), …)``)."""

    def options_json(self) -> list[dict[str, str]]:
        """The ACP ``PermissionOption`` list: ``optionId`` equals ``kind`` (except those in ``kinds``)."""
        names, kinds = {**OPTION_NAMES, **dict(self.names)}, dict(self.kinds)
        return [{"optionId": o, "name": names[o], "kind": kinds.get(o, o)} for o in self.options]


@dataclass(frozen=True)
class Answer:
    """How a question ended. ``kind``: ``selected`` (``option`` is the chosen id), ``cancelled``
    (the client answered cancelled), ``timeout``, ``error`` (an error response), ``malformed``,
    ``unknown_option``, ``unavailable`` (no client, or it cannot be asked); ``detail``: for logs;
    ``by``: who decided when it was not the user nor a failure (``"flag: --allow shell"``: a
    headless run's grant), else ``""``; ``headless``: ``unavailable`` because the run has no one to
    ask at all (``agent-server run`` without a terminal) — not a client that went away."""

    kind: AnswerKind
    option: str | None = None
    detail: str = ""
    by: str = ""
    headless: bool = False

    @property
    def allowed(self) -> bool:
        """Only an explicit allow allows."""
        return self.kind == "selected" and self.option in (ALLOW_ONCE, ALLOW_ALWAYS)

    @property
    def decided_by(self) -> str:
        """Who decided, for ``policy/decision``: ``by`` when set (``flag: --allow shell``), else
        ``user`` or ``fail-closed:<kind>``."""
        if self.by:
            return self.by
        return "user" if self.kind == "selected" else f"fail-closed:{self.kind}"


class Approver(Protocol):
    """Asks the user. Never raises except ``asyncio.CancelledError`` (the turn was cancelled;
    the pending request is then cancelled too)."""

    async def ask(self, question: Ask) -> Answer: ...


def denial_text(answer: Answer, what: str, timeout: float | None = None) -> str:
    """The tool result the model gets when ``answer`` did not allow ``what`` (e.g. "this command")."""
    if answer.kind == "selected":
        remembered = " (and to reject such calls for the rest of the session)" if answer.option == REJECT_ALWAYS else ""
        return (f"Rejected by the user: the user chose not to allow {what}{remembered}. It did not run. "
                "Do not retry it; ask the user or take another approach.")
    if answer.kind == "cancelled":
        return (f"Cancelled: the permission request for {what} was cancelled before the user decided. "
                "It did not run.")
    if answer.kind == "timeout":
        wait = f" within {timeout:g} s" if timeout else ""
        return (f"Timed out: no one answered the permission request for {what}{wait}, so it was denied. "
                "It did not run.")
    if answer.kind == "unavailable":
        why = answer.detail or "the client cannot answer permission requests"
        return (f"Approval unavailable: no one could be asked to approve {what} ({why}), so it was denied. "
                "It did not run. Do not retry; tell the user what you need instead.")
    if answer.kind == "error":
        return (f"Approval failed: the permission request for {what} got an error from the client "
                f"({answer.detail}), so it was denied. It did not run.")
    return (f"Approval failed: the client's answer to the permission request for {what} was not a valid "
            f"choice ({answer.detail}), so it was denied. It did not run.")


@dataclass(frozen=True)
class Rule:
    """A remembered answer: ``tool``; ``prefix`` (shell only; ``None`` = the whole tool);
    ``allow``: allow or reject; ``exact``: ``prefix`` is a whole command that must match exactly
    (character for character), not the leading words of one."""

    tool: str
    prefix: str | None
    allow: bool
    exact: bool = False

    def describe(self) -> str:
        """``always allow `pytest``` / ``always allow exactly `awk -f x.awk```/ ``always reject read``."""
        verb = "always allow" if self.allow else "always reject"
        if self.tool == OUTSIDE_READS and self.prefix is not None:
            return f"{verb} reading in `{self.prefix}`"
        if self.tool == NETWORK and self.prefix is not None:
            return f"{verb} the network for `{self.prefix}`"
        if self.prefix is None:
            return f"{verb} {self.tool}"
        return f"{verb} exactly `{self.prefix}`" if self.exact else f"{verb} `{self.prefix}`"


@dataclass
class ApprovalMemory:
    """The session's remembered rules (in memory: a new session starts empty)."""

    rules: list[Rule] = field(default_factory=list)

    def remember(self, rule: Rule) -> None:
        """Add ``rule``, replacing an earlier rule for the same tool, prefix and exactness."""
        key = (rule.tool, rule.prefix, rule.exact)
        self.rules = [r for r in self.rules if (r.tool, r.prefix, r.exact) != key] + [rule]

    def lookup(self, tool: str, matches_prefix: Any = None, command: str | None = None) -> Rule | None:
        """The rule covering a call of ``tool``; ``matches_prefix(prefix) -> bool`` decides shell
        prefixes and ``command`` (the call's whole shell command) exact rules (``None``: only
        whole-tool rules apply). Rejections win over allows."""

        def covers(r: Rule) -> bool:
            if r.prefix is None:
                return True
            if r.exact:
                return command is not None and command == r.prefix
            return matches_prefix is not None and bool(matches_prefix(r.prefix))

        found = [r for r in self.rules if r.tool == tool and covers(r)]
        rejected = [r for r in found if not r.allow]
        return (rejected or found or [None])[0]

    def summary(self) -> str:
        """The rules as one line for the next permission title ('' when none)."""
        return "; ".join(r.describe() for r in self.rules)
