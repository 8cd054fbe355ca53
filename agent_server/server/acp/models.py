"""Pydantic models of the ACP v1 messages the server reads (schema: ``shared/acp/schema.json``).

Role: validate incoming params with clear errors. Unknown fields are kept (ACP adds fields over
time and ``_meta`` is open), required ones are enforced, and the tests hold these models to the
official schema by validating every transcript against it.

Must never: be imported before ``initialize`` has been answered (start-up time).
"""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class _Open(BaseModel):
    # defer_build: a model is built when first used, not at import — a session uses a few of them
    model_config = ConfigDict(extra="allow", populate_by_name=True, defer_build=True)

    meta: dict[str, Any] | None = Field(default=None, alias="_meta")


class FileSystemCapability(_Open):
    """``clientCapabilities.fs``."""

    readTextFile: bool = False
    writeTextFile: bool = False


class ClientCapabilities(_Open):
    """``initialize.params.clientCapabilities``."""

    fs: FileSystemCapability = Field(default_factory=FileSystemCapability)
    terminal: bool = False


class InitializeParams(_Open):
    """``initialize`` params; ``protocolVersion`` is read but we always answer 1."""

    protocolVersion: Any = None
    clientCapabilities: ClientCapabilities = Field(default_factory=ClientCapabilities)
    clientInfo: dict[str, Any] | None = None


def _absolute(path: str) -> str:
    if "\x00" in path:
        raise ValueError("invalid path: it contains a NUL byte")
    if not os.path.isabs(path):
        raise ValueError(f"must be an absolute path, got {path!r}")
    return path


class _WorkspaceParams(_Open):
    """The workspace fields shared by ``session/new``, ``load``, ``resume`` and ``fork``: an absolute
    ``cwd``, absolute ``additionalDirectories``, and the client's ``mcpServers``."""

    cwd: str
    # plain defaults, not default_factory=list: pydantic copies a mutable default per instance, and
    # the signature of a builtin factory costs a tokenizer regex compile at import (bench/README.md)
    additionalDirectories: list[str] = []
    mcpServers: list[dict[str, Any]] = []

    @field_validator("cwd")
    @classmethod
    def _cwd_absolute(cls, value: str) -> str:
        return _absolute(value)

    @field_validator("additionalDirectories")
    @classmethod
    def _dirs_absolute(cls, value: list[str]) -> list[str]:
        return [_absolute(v) for v in value]


class NewSessionParams(_WorkspaceParams):
    """``session/new`` params. ``mcpServers``: stdio and http servers are started after the answer."""


class TextContent(_Open):
    type: Literal["text"]
    text: str


class ImageContent(_Open):
    type: Literal["image"]
    data: str
    mimeType: str


class AudioContent(_Open):
    type: Literal["audio"]
    data: str
    mimeType: str


class ResourceLink(_Open):
    type: Literal["resource_link"]
    uri: str
    name: str


class EmbeddedResource(_Open):
    type: Literal["resource"]
    resource: dict[str, Any]

    @field_validator("resource")
    @classmethod
    def _has_uri(cls, value: dict[str, Any]) -> dict[str, Any]:
        if not isinstance(value.get("uri"), str):
            raise ValueError("resource.uri must be a string")
        if not isinstance(value.get("text"), str) and not isinstance(value.get("blob"), str):
            raise ValueError("resource needs text or blob")
        return value


ContentBlock = Annotated[
    Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource],
    Field(discriminator="type"),
]


class PromptParams(_Open):
    """``session/prompt`` params."""

    sessionId: str
    prompt: list[ContentBlock]


class CancelParams(_Open):
    """``session/cancel`` params."""

    sessionId: str


class LoadSessionParams(_WorkspaceParams):
    """``session/load`` params (schema ``LoadSessionRequest``)."""

    sessionId: str


class ResumeSessionParams(LoadSessionParams):
    """``session/resume`` params (schema ``ResumeSessionRequest``: the same fields as a load)."""


class ForkSessionParams(LoadSessionParams):
    """``session/fork`` params (unstable schema ``ForkSessionRequest``); the fork point may be
    named in ``_meta.agentServer.forkAtTurn`` (read from the raw params)."""


class AuthenticateParams(_Open):
    """``authenticate`` params (schema ``AuthenticateRequest``)."""

    methodId: str


class CloseSessionParams(_Open):
    """``session/close`` params (schema ``CloseSessionRequest``)."""

    sessionId: str


class ListSessionsParams(_Open):
    """``session/list`` params (schema ``ListSessionsRequest``)."""

    cwd: str | None = None
    cursor: str | None = None


class DeleteSessionParams(_Open):
    """``session/delete`` params (schema ``DeleteSessionRequest``)."""

    sessionId: str


class SetModeParams(_Open):
    """``session/set_mode`` params (schema ``SetSessionModeRequest``)."""

    sessionId: str
    modeId: str


class SetConfigOptionParams(_Open):
    """``session/set_config_option`` params (schema ``SetSessionConfigOptionRequest``)."""

    sessionId: str
    configId: str
    value: Any = None
    type: str | None = None


SYSTEM_PROMPT_MODES = ("append", "override")
"""The ``systemPrompt.mode`` values agent-server applies (advertised in ``sessionCapabilities.systemPrompt``)."""


class SystemPromptError(ValueError):
    """A ``systemPrompt`` (or ``_meta.systemPrompt``) that cannot be applied: ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def client_system_prompt(params: dict[str, Any]) -> dict[str, str] | None:
    """The client's system prompt of a ``session/new|load|resume|fork``: ``{"mode", "text",
    "source"}`` or ``None`` (none sent: the session keeps what it has).

    ``systemPrompt`` (ACP unstable, 1.29.x ``SystemPrompt``): ``mode`` ``append`` or ``override``
    and a non-empty ``content`` of ``text`` blocks (joined by a blank line); any other mode or
    block type raises ``SystemPromptError`` (the schema: an agent errors rather than guess). Else
    the older ``_meta.systemPrompt`` (claude-agent-acp's): a string replaces the instructions
    (``override``), ``{"append": string}`` adds to them; ``""`` is none. ``systemPrompt`` wins."""
    value = params.get("systemPrompt")
    if value is not None:
        if not isinstance(value, dict):
            raise SystemPromptError("systemPrompt", "systemPrompt must be an object {mode, content}")
        mode = value.get("mode")
        if mode not in SYSTEM_PROMPT_MODES:
            raise SystemPromptError("systemPrompt.mode", f"unsupported systemPrompt mode {mode!r}: agent-server "
                                    "supports 'append' and 'override'")
        content = value.get("content")
        if not isinstance(content, list) or not content:
            raise SystemPromptError("systemPrompt.content", "systemPrompt.content must be a non-empty array of "
                                    "text content blocks")
        texts = []
        for index, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
                kind = block.get("type") if isinstance(block, dict) else type(block).__name__
                raise SystemPromptError(f"systemPrompt.content.{index}", f"unsupported systemPrompt content block "
                                        f"{kind!r}: only text blocks ({{type: 'text', text}}) are supported")
            texts.append(block["text"])
        return {"mode": mode, "text": "\n\n".join(texts), "source": "systemPrompt"}
    meta = params.get("_meta")
    legacy = meta.get("systemPrompt") if isinstance(meta, dict) else None
    if legacy is None or legacy == "":
        return None
    if isinstance(legacy, str):
        return {"mode": "override", "text": legacy, "source": "_meta.systemPrompt"}
    if isinstance(legacy, dict) and isinstance(legacy.get("append"), str):
        return {"mode": "append", "text": legacy["append"], "source": "_meta.systemPrompt"} if legacy["append"] else None
    raise SystemPromptError("_meta.systemPrompt", "_meta.systemPrompt must be a string (it replaces the agent's "
                            "instructions) or {append: string} (added to them)")


def describe_validation_error(exc: ValidationError) -> dict[str, Any]:
    """JSON-RPC ``error.data`` for invalid params: ``{"errors": [{"path", "message"}]}``."""
    return {
        "errors": [
            {"path": ".".join(str(p) for p in err.get("loc", ())), "message": err["msg"]}
            for err in exc.errors(include_url=False)
        ]
    }
