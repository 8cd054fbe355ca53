"""The tool definition contract: what every builtin tool declares and how it is called.

Role: ``Tool`` (name, description, argument model, JSON schema for the model, ACP kind,
concurrency safety, timeout, title and locations for the editor, ``run``), the ``ToolResult`` it
returns, the ``ToolContext`` it runs in, ``validate_args`` for the model's raw JSON arguments, and
the path helpers every tool shares (``resolve_path``, ``display_path``).

Must never: let a failure escape as an exception — a tool answers every failure with
``ToolResult.error`` — nor change the arguments it was given.

Outside ``agent_server.tools`` this package imports only ``policy.decision`` (the ``Guard``
contract, in ``pipeline.py``) and ``session`` (the log: ``pipeline.py``, ``repeats.py``);
``tests/test_layers.py`` holds it below ``host``/``agent`` and above ``policy``.
"""

from __future__ import annotations

import copy
import json
import os
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Callable, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError

from .access import FileAccess, SecretRules
from .child_env import redact
from .files import DiskFiles, ReadLedger, WorkspaceFiles
from .output import SESSION_SPILL_LIMIT_BYTES, SPILL_LIMIT_BYTES

#: The pipeline's default per-result budget (characters) — see ``output.trim_for_model``.
DEFAULT_RESULT_CHARS = 8192


@dataclass
class ToolResult:
    """What a tool returns.

    ``text``: what the model sees (not yet trimmed — the pipeline trims it). ``is_error``: the call
    failed (ACP status ``failed``). ``content``: ACP ``ToolCallContent`` entries for the editor,
    e.g. ``{"type": "diff", "path": abs, "oldText": str | None, "newText": str}``. ``locations``:
    ACP ``ToolCallLocation`` entries ``{"path": abs, "line": 1-based}`` (``line`` optional).
    ``meta``: small JSON-able facts for the log (exit code, counts …), never shown to the model.
    ``updates``: further ACP session updates to send once the result is committed (e.g. ``plan``).
    """

    text: str
    is_error: bool = False
    content: list[dict[str, Any]] = field(default_factory=list)
    locations: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    updates: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def error(cls, text: str, **meta: Any) -> ToolResult:
        """An error result whose ``text`` tells the model what went wrong and what to do."""
        return cls(text=text, is_error=True, meta=dict(meta))


@dataclass
class ToolContext:
    """Everything a tool may use while it runs.

    ``roots``: absolute workspace roots, ``roots[0]`` is the working folder (relative paths and
    ``bash`` start there). ``files``: the workspace-file seam. ``reads``: the session's read
    ledger. ``session_dir``: the session's folder (for spill files), ``None`` in unit tests.
    ``env``: environment for ``bash`` (``None``: ``os.environ``). ``shell_launcher``: how
    ``bash`` starts a command (``(argv, env) -> launch``, see ``bash.ShellLauncher``; policy's OS
    sandbox), ``None``: run it as is.
    """

    roots: tuple[Path, ...]
    files: WorkspaceFiles
    reads: ReadLedger
    session_dir: Path | None = None
    env: Mapping[str, str] | None = None
    shell_launcher: Callable[[list[str], dict[str, str]], Any] | None = None
    is_secret: Callable[[Path], bool] | None = None
    """Policy's test for files that may hold secrets: folder-wide searches leave them out (reading
    one explicitly goes through the policy, which asks)."""
    is_secret_resolved: Callable[[Path], bool] | None = None
    """``is_secret`` for a path already resolved (no link in it: no resolution per file); ``None``:
    ``is_secret``."""
    secret_rules: SecretRules | None = None
    """``is_secret`` as rules (``access.SecretRules``): a folder-wide ``grep`` leaves secrets out by
    rule, without listing every file first; ``None``: it lists the files and asks ``is_secret``."""
    redact: tuple[str, ...] = ()
    """Secrets (the API key) replaced by ``<redacted>`` in every result — defence in depth only: the
    key is never given to a tool, and an encoded copy (base64) would pass."""
    max_spill_bytes: int = SPILL_LIMIT_BYTES
    """Most bytes one ``bash`` call writes to its spill file (config ``[agent] max_spill_bytes``);
    the rest of its output is read and dropped, and the result says how much."""
    max_session_spill_bytes: int = SESSION_SPILL_LIMIT_BYTES
    """Most bytes all spill files of the session hold (``[agent] max_session_spill_bytes``): a
    spill that would pass it saves only what is left, or is not written."""
    env_dropped: tuple[str, ...] = ()
    """Names of variables left out of ``env`` as possible credentials (``child_env.split_environ``):
    the session's first shell call names them (and how to allow one)."""
    env_dropped_told: bool = False
    """Whether a shell call of this session has named ``env_dropped`` already."""
    access: FileAccess = None  # type: ignore[assignment]
    """The file tools' access rules (``access.FileAccess``: ``/proc``, protected credential stores,
    where writes are anchored); default: ``FileAccess(roots)`` with nothing protected."""

    def __post_init__(self) -> None:
        if self.access is None:
            self.access = FileAccess(self.roots)

    @classmethod
    def on_disk(
        cls,
        *roots: Path | str,
        session_dir: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ToolContext:
        """A context with ``DiskFiles`` and a fresh ledger; ``roots`` made absolute."""
        if not roots:
            raise ValueError("at least one workspace root is needed")
        absolute = tuple(Path(os.path.abspath(r)) for r in roots)
        access = FileAccess(absolute)
        return cls(absolute, DiskFiles(access=access), ReadLedger(), session_dir, env, access=access)

    @property
    def cwd(self) -> Path:
        """The working folder, ``roots[0]``."""
        return self.roots[0]


def resolve_path(path: str, roots: tuple[Path, ...] | list[Path]) -> Path:
    """The absolute path a tool acts on for the model's ``path`` argument.

    A leading ``~`` is the user's home; a relative path is joined to ``roots[0]``; ``.`` and
    ``..`` are folded lexically. Symlinks are *not* resolved (policy resolves them for its checks;
    the ledger keys by the resolved path).
    """
    expanded = os.path.expanduser(path) if path.startswith("~") else path
    joined = os.path.join(roots[0], expanded)  # an absolute ``expanded`` wins
    return Path(os.path.normpath(joined))


def display_path(path: Path | str, roots: tuple[Path, ...] | list[Path]) -> str:
    """``path`` as shown in titles and results: relative to ``roots[0]`` when inside it (``.`` for
    the root itself), else absolute."""
    p = Path(os.path.normpath(path))
    try:
        rel = p.relative_to(roots[0])
    except ValueError:
        return str(p)
    return str(rel) if str(rel) != "." else "."


def one_line(text: str, limit: int = 80) -> str:
    """``text`` on one line (first line only, with ``…`` when more follows), at most ``limit``
    characters — for titles."""
    first, _, rest = text.strip().partition("\n")
    more = bool(rest.strip())
    if len(first) > limit:
        first, more = first[: limit - 1], True
    return first + ("…" if more else "")


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("invalid path: it contains a NUL byte (\\u0000), which no file name can hold")
    return value


PathText = Annotated[str, AfterValidator(_no_nul)]
"""A path argument: a string without NUL bytes (one is a clear "invalid path" argument error)."""


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown arguments are an error; types are strict
    (``"10"`` is not an integer), so what runs is exactly what the model sent."""

    # defer_build: built on first use (the host warms the tools' schemas after session/new)
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class Tool(ABC):
    """One builtin tool. Subclasses set the class attributes and implement ``run`` and ``title``.

    ``name``/``description``/``Args``: what the model is offered. ``kind``: the ACP ``ToolKind``
    (``read``, ``edit``, ``execute``, ``search`` …). ``concurrency_safe``: may run in parallel with
    other safe calls (invariant 4). ``default_timeout``: seconds the pipeline allows a call.
    ``max_result_chars``: the most characters a result of this tool is designed to carry (8192 for
    most; ``read`` bounds its own output at 50 KB) — a hint for the pipeline's trim.
    ``live_output``: the tool prints as it runs (``bash``): an editor that announced the terminal
    convention is shown its output live (``tools.live``).
    """

    name: ClassVar[str]
    description: ClassVar[str]
    Args: ClassVar[type[BaseModel]]
    kind: ClassVar[str]
    concurrency_safe: ClassVar[bool] = False
    default_timeout: ClassVar[float] = 60.0
    max_result_chars: ClassVar[int] = DEFAULT_RESULT_CHARS
    live_output: ClassVar[bool] = False

    _schema_cache: ClassVar[dict[type, str]] = {}

    def schema(self) -> dict[str, Any]:
        """The OpenAI ``tools`` entry: ``{"type": "function", "function": {"name",
        "description", "parameters"}}``; ``parameters`` is the JSON schema of ``Args`` without
        titles, with ``additionalProperties: false`` and optional arguments as plain types.
        A fresh dict every call, the same bytes every call."""
        cls = type(self)
        cached = Tool._schema_cache.get(cls)
        if cached is None:
            params = clean_schema(self.Args.model_json_schema())
            params.pop("description", None)  # the Args docstring is for us; the tool has its own
            entry = {
                "type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": params},
            }
            cached = Tool._schema_cache[cls] = json.dumps(entry, ensure_ascii=False)
        return json.loads(cached)

    def timeout(self, args: Any) -> float:
        """Seconds this call may run before the pipeline stops it."""
        return self.default_timeout

    @abstractmethod
    def title(self, args: Any, ctx: ToolContext) -> str:
        """A short human title for the editor, e.g. ``"Read src/app.py:10-40"``."""

    def locations(self, args: Any, ctx: ToolContext) -> list[dict[str, Any]]:
        """ACP locations known before the call runs (absolute paths, 1-based lines)."""
        return []

    async def run(self, args: BaseModel, ctx: ToolContext) -> ToolResult:
        """Do the work. ``args`` is a validated ``Args`` instance.

        Never raises: an unexpected exception inside the tool becomes ``ToolResult.error``.
        ``asyncio.CancelledError`` (a ``BaseException``) propagates after the tool has cleaned up,
        except for ``bash``, which answers a cancellation with a result (see ``BashTool``).
        """
        try:
            result = await self.execute(args, ctx)
        except Exception as exc:  # noqa: BLE001 - the contract: never raise to the caller
            result = ToolResult.error(
                f"`{self.name}` failed unexpectedly: {type(exc).__name__}: {exc}",
                internal_error=True,
            )
        if ctx.redact:
            result.text = redact(result.text, ctx.redact)
        return result

    async def precondition(self, args: Any, ctx: ToolContext) -> ToolResult | None:
        """The error result this call would surely end with, found without changing anything
        (``None``: none known). The pipeline asks it after the policy's verdict and before a
        permission question, so the user is never asked about a call that cannot succeed
        (``edit`` of a file the model has not read). Never raises; the default knows none."""
        return None

    async def checked_precondition(self, args: Any, ctx: ToolContext) -> ToolResult | None:
        """``precondition``, with an unexpected exception read as "none known" (the call then
        runs and reports it itself) and the result redacted like ``run``'s."""
        try:
            result = await self.precondition(args, ctx)
        except Exception:  # noqa: BLE001 - the tool's own run reports what went wrong
            return None
        if result is not None and ctx.redact:
            result.text = redact(result.text, ctx.redact)
        return result

    @abstractmethod
    async def execute(self, args: Any, ctx: ToolContext) -> ToolResult:
        """The tool's own work, called by ``run``; subclasses implement this."""


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A pydantic JSON schema made plain for model providers: no ``title`` keys, ``X | None``
    written as ``X`` (the argument is simply optional), no ``default: null``,
    ``additionalProperties: false`` on objects."""
    schema = copy.deepcopy(schema)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(n) for n in node]
        if not isinstance(node, dict):
            return node
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "title":
                continue
            if key == "properties":
                out[key] = {name: walk(sub) for name, sub in value.items()}
            else:
                out[key] = walk(value)
        any_of = out.get("anyOf")
        if isinstance(any_of, list):
            non_null = [s for s in any_of if s != {"type": "null"}]
            if len(non_null) == 1 and len(non_null) < len(any_of):
                merged = {k: v for k, v in out.items() if k != "anyOf"}
                out = {**non_null[0], **merged}
        if "default" in out and out["default"] is None:
            del out["default"]
        if out.get("type") == "object":
            out["additionalProperties"] = False
        return {k: out[k] for k in sorted(out, key=_key_rank)}

    return walk(schema)


_KEY_ORDER = ("type", "description", "properties", "required", "additionalProperties")


def _key_rank(key: str) -> tuple[int, str]:
    """Schema keys in a readable, fixed order: type, description, properties, required, …, rest
    alphabetically."""
    return (_KEY_ORDER.index(key), "") if key in _KEY_ORDER else (len(_KEY_ORDER), key)


def _describe_input(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:57] + "…"


def validate_args(tool: Tool, raw_arguments: str) -> BaseModel | ToolResult:
    """Parse the model's JSON argument string for ``tool``.

    ``""`` (or only whitespace) counts as ``{}``. Returns an ``Args`` instance, or a
    ``ToolResult.error`` naming each offending field and what was expected, plus the argument list.
    """
    signature = _signature(tool)
    text = raw_arguments if raw_arguments.strip() else "{}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return ToolResult.error(
            f"Invalid arguments for `{tool.name}`: not valid JSON ({exc.msg} at character "
            f"{exc.pos}). Send one JSON object: {signature}."
        )
    if not isinstance(data, dict):
        return ToolResult.error(
            f"Invalid arguments for `{tool.name}`: expected a JSON object, got "
            f"{type(data).__name__}. Send: {signature}."
        )
    try:
        return tool.Args.model_validate(data)
    except ValidationError as exc:
        allowed = ", ".join(tool.Args.model_fields)
        problems = []
        for err in exc.errors(include_url=False):
            where = ".".join(str(p) for p in err["loc"]) or "(arguments)"
            if err["type"] == "missing":
                problems.append(f"- `{where}` is required but missing")
            elif err["type"] == "extra_forbidden":
                problems.append(f"- `{where}` is not an argument of `{tool.name}` (allowed: {allowed})")
            else:
                got = _describe_input(err.get("input"))
                problems.append(f"- `{where}`: {err['msg']} (got {got})")
        return ToolResult.error(
            f"Invalid arguments for `{tool.name}`:\n" + "\n".join(problems) + f"\nExpected: {signature}."
        )


def _signature(tool: Tool) -> str:
    """``{"path": string (required), "offset": integer (optional)}``-style argument summary."""
    props = tool.schema()["function"]["parameters"].get("properties", {})
    required = set(tool.schema()["function"]["parameters"].get("required", []))
    parts = []
    for name, sub in props.items():
        kind = sub.get("type", "value")
        parts.append(f'"{name}": {kind} ({"required" if name in required else "optional"})')
    return "{" + ", ".join(parts) + "}"
