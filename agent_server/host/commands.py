"""Slash commands: ``/mode``, ``/model``, ``/usage``, ``/init``, ``/compact``, ``/undo``, ``/redo``,
``/checkpoints`` typed as a prompt.

Role: the commands advertised with ``available_commands_update`` after ``session/new``; recognise
a prompt whose text starts with ``/`` and a known name; run it. A command that changes the
session logs its change (``mode/changed`` through policy, ``model/changed`` here) and is logged
itself as ``command`` — it is not a user message, so the model never sees the command line, only
its effect (the next request's header). ``/init`` becomes a turn: the model is asked to write a
starter ``AGENTS.md`` with its tools, so the file arrives as an edit proposal like any other.
``/compact`` compacts the history now (``AgentSession.compact_now``: the usual ``compaction/*``
events, after a running turn).

Must never: treat text that merely starts with ``/`` as a command (a path such as ``/etc/hosts``
is a prompt), send ``/word`` (an unknown command: it is answered with the list of commands) to the
model, or change the session without an event saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from agent_server.agent.budget import CostMemo
from agent_server.config.load import AgentSettings
from agent_server.config.views import SLASH_COMMANDS
from agent_server.session import EventLog, SessionEvent

COMMANDS: list[dict[str, Any]] = SLASH_COMMANDS
"""ACP ``AvailableCommand``\\s, in the order they are offered (``config.views``: ``initialize`` lists
them too, before any session)."""

INIT_PROMPT = (
    "Create a starter AGENTS.md at the root of this workspace for coding agents working on this "
    "project. First look around (list files, read the README and build/test configuration). Then "
    "write a short AGENTS.md covering: what the project is, how to set it up, how to build and run "
    "the tests, the code layout, and the conventions you can see. Keep it under 60 lines and state "
    "only what you verified. If an AGENTS.md already exists, read it and improve it instead."
)


_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")


def parse_command(blocks: Sequence[dict[str, Any]]) -> tuple[str, str] | None:
    """``(name, argument)`` when the prompt is a single text block ``/name [argument]`` whose
    ``name`` is a plain word (letters, digits, ``-``, ``_``) — known or not (an unknown one is
    answered with ``unknown_command_text``); ``None`` otherwise (``/etc/hosts …`` is a prompt)."""
    if len(blocks) != 1 or blocks[0].get("type") != "text":
        return None
    text = str(blocks[0].get("text", "")).strip()
    if not text.startswith("/"):
        return None
    name, _, argument = text[1:].partition(" ")
    if "\n" in name:
        name, _, rest = name.partition("\n")
        argument = f"{rest} {argument}"
    if not _NAME.fullmatch(name):
        return None
    return name, argument.strip()


@dataclass(frozen=True)
class Dispatched:
    """What a prompt became (``SessionHost.dispatch``): a command's answer, or a turn's blocks."""

    reply: dict[str, Any] | None = None
    """The command's answer (``{"stopReason"}``): the prompt is answered with it, no turn runs."""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    """The turn's prompt blocks when ``reply`` is ``None`` (``/init``: ``INIT_PROMPT`` alone)."""
    command: str | None = None
    """The slash command's name, when the prompt was one."""


def is_known(name: str) -> bool:
    """Whether ``name`` is one of ``COMMANDS``."""
    return name in {c["name"] for c in COMMANDS}


def unknown_command_text(name: str) -> str:
    """The answer to ``/name`` when no such command exists: the commands there are."""
    listing = "\n".join(f"  /{c['name']}{' <' + c['input']['hint'] + '>' if 'input' in c else ''} — "
                         f"{c['description']}" for c in COMMANDS)
    return (f"Unknown command /{name}. The commands are:\n{listing}\n"
            "(To send text starting with / to the model, put a space or another word before it.)")


def current_model(events: Sequence[SessionEvent], default: str | None) -> str | None:
    """The session's model: the last ``model/changed`` in the log, else ``default``."""
    for event in reversed(events):
        if event.type == "model/changed":
            return event.data["to"]
    return default


def _count(n: int, noun: str) -> str:
    """``1 turn``, ``2 turns``, ``0 turns``."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def usage_report(events: Sequence[SessionEvent], context_window: int, settings: AgentSettings | None = None,
                 estimate: int | None = None) -> str:
    """A short text: tokens of the last request, totals over the session (summarising requests and
    failed tries included), turns and requests; with ``settings``, the share of input tokens the
    provider's prompt cache served and what that saved at the configured price. When the endpoint
    reported no usage, ``estimate`` (the next request's estimated tokens) stands for it."""
    last: dict[str, Any] | None = None
    prompt = completion = requests = 0
    for event in events:
        if event.type == "assistant/attempt" or (event.type == "compaction/attempt" and not event.data.get("cancelled")):
            requests += 1  # a failed try is a request too (it may have been billed)
        if event.type in ("assistant", "compaction/summary"):
            requests += 1
            usage = event.data.get("usage")
            if not isinstance(usage, dict):
                continue
            if event.type == "assistant":
                last = usage
            prompt += int(usage.get("prompt_tokens") or 0)
            completion += int(usage.get("completion_tokens") or 0)
    turns = sum(1 for e in events if e.type == "turn/start")
    if last is None:
        text = (f"No model usage recorded yet in this session ({_count(turns, 'turn')})." if not requests else
                f"The endpoint reported no token usage for this session's {_count(requests, 'model request')} "
                f"({_count(turns, 'turn')}).")
        if estimate is not None and context_window:
            text += (f"\nContext: about {estimate:,} of {context_window:,} tokens "
                     f"({100 * estimate / context_window:.1f}%) in the next request, estimated from its characters.")
        return text
    used = int(last.get("total_tokens") or (int(last.get("prompt_tokens") or 0) + int(last.get("completion_tokens") or 0)))
    share = f"{100 * used / context_window:.1f}%" if context_window else "?"
    text = (f"Context: {used:,} of {context_window:,} tokens ({share}) in the last request.\n"
            f"Session: {_count(turns, 'turn')}, {_count(requests, 'model request')}, {prompt:,} prompt + {completion:,} "
            f"completion tokens in all.")
    if settings is not None:
        totals = CostMemo().tokens(events, settings)
        if totals["cached"] is not None:
            cache_share = 100 * totals["cached"] / totals["prompt"] if totals["prompt"] else 0.0
            text += (f"\nCache: {cache_share:.0f} % of input tokens this session ({totals['cached']:,} of "
                     f"{totals['prompt']:,} served by the provider's prompt cache)")
            text += f", saved {_money(totals['saved'])}." if totals["saved"] is not None else "."
    return text


def _money(amount: dict[str, Any]) -> str:
    """``$0.0012`` for USD, else ``0.0012 EUR``: up to six decimals, trailing zeros dropped."""
    figure = f"{amount['amount']:.6f}".rstrip("0").rstrip(".")
    return f"${figure}" if amount.get("currency") == "USD" else f"{figure} {amount.get('currency')}"


def log_command(log: EventLog, name: str, argument: str, outcome: str) -> SessionEvent:
    """Record a command and what it did (``command`` events are never projected)."""
    return log.append("command", {"name": name, "argument": argument, "outcome": outcome})


def reply_id(event: SessionEvent) -> str:
    """The ``messageId`` of a command's reply: ``cmd-N``, N the ``seq`` of its ``command`` event, so
    that two replies sent close together stay two messages and ``session/load`` replays the same id."""
    return f"cmd-{event.seq}"


def change_model(log: EventLog, model: str, default: str | None) -> str:
    """Switch the session's model (logged as ``model/changed``); returns the text for the user."""
    before = current_model(log.events, default)
    if not model:
        return f"The model is {before}. Use /model <id> to switch."
    if model == before:
        return f"The model already is {model}."
    log.append("model/changed", {"from": before, "to": model})
    return f"Model switched from {before} to {model} for this session."
