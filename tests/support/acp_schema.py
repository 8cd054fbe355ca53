"""Validate ACP v1 JSON-RPC transcripts against the official ACP schema.

Role: the conformance oracle of the test suite. Give it every message of a conversation, in both
directions, and it checks each request's ``params``, each response's ``result`` (paired with its
request by id and direction), each notification's ``params`` and each error object against the
official schema (``tests/fixtures/acp/schema-v1.29.x.json``, the copy the TypeScript SDK 2.4.0
bundles; its unstable sibling for unstable methods; ``schema.json`` is the 1.21.0 copy followed before).

How methods are bound to their types: the schema's top-level ``anyOf`` does not tie a method name
to its params/result, so the binding is built from ``$defs``:

* every method type carries ``x-method`` (the wire method name) and ``x-side`` (the side that
  *handles* the method: ``"agent"``, ``"client"``, or ``"protocol"`` for ``$/…`` messages);
* whether a def is a request, a response or a notification – and who sends it – comes from the
  routing unions it is listed in: ``ClientRequest``/``AgentRequest`` (``params``),
  ``ClientResponse``/``AgentResponse`` (``result``), ``ClientNotification``/``AgentNotification``
  (``params``); ``Client*`` unions are what the client sends, ``Agent*`` what the agent sends;
* defs with ``x-side: "protocol"`` (``$/cancel_request``) are referenced only from the top-level
  ``ProtocolLevel`` branch and may be sent by either side;
* the binding is cross-checked: a client-sent request/notification must have ``x-side: "agent"``,
  an agent-sent one ``x-side: "client"``, a response the ``x-side`` of its sender; every def with
  ``x-method`` must be bound exactly once per kind. A schema that breaks this fails loudly.

Extension methods (names starting with ``_``) are not schema-checked: they are returned in
``TranscriptReport.extensions`` so the caller can validate them otherwise.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker
from jsonschema.exceptions import ValidationError, relevance
from referencing import Registry, Resource

from .transcript import AGENT_TO_CLIENT, CLIENT_TO_AGENT, DIRECTIONS, parse_line

__all__ = [
    "AGENT_TO_CLIENT",
    "CLIENT_TO_AGENT",
    "SCHEMA_PATH",
    "SCHEMA_SHA256",
    "UNSTABLE_SCHEMA_PATH",
    "UNSTABLE_SCHEMA_SHA256",
    "AcpSchema",
    "Failure",
    "MethodBinding",
    "SchemaBindingError",
    "Skipped",
    "TranscriptReport",
    "load_schema",
    "load_unstable_schema",
    "validate_transcript",
]

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "fixtures" / "acp" / "schema-v1.29.x.json"
"""The 1.29.x schema the official TypeScript SDK 2.4.0 bundles (additive over 1.21)."""
SCHEMA_SHA256 = "0d0b1ca83c4872e5473f68926a894c7a8203b59b118e2a79bfe43dd76fbcbc1a"
UNSTABLE_SCHEMA_PATH = SCHEMA_PATH.with_name("schema-v1.29.x.unstable.json")
"""The unstable sibling of the same release (``session/fork`` and other unstable methods)."""
UNSTABLE_SCHEMA_SHA256 = "ce7881d10c854bcac4f0e7d3a9ce4fb0f612ec0a09e64b572940beec4668c189"
SCHEMA_V1_21_PATH = SCHEMA_PATH.with_name("schema.json")
"""The 1.21.0 copy the suite followed before (``load_schema(SCHEMA_V1_21_PATH, verify_hash=False)``)."""
_SCHEMA_URI = "urn:acp:schema:v1"

# routing union $def -> (kind, sending direction)
_UNIONS: dict[str, tuple[str, str]] = {
    "ClientRequest": ("request", CLIENT_TO_AGENT),
    "AgentRequest": ("request", AGENT_TO_CLIENT),
    "ClientResponse": ("response", CLIENT_TO_AGENT),
    "AgentResponse": ("response", AGENT_TO_CLIENT),
    "ClientNotification": ("notification", CLIENT_TO_AGENT),
    "AgentNotification": ("notification", AGENT_TO_CLIENT),
}
# the unstable proxy-routing unions (1.29.x: a conductor talks to proxies; never an agent's traffic):
# bound so that every x-method def is reachable, with x-side "proxy"
_PROXY_UNIONS: dict[str, tuple[str, str]] = {
    "ProxyRequest": ("request", CLIENT_TO_AGENT),
    "ProxyResponse": ("response", AGENT_TO_CLIENT),
    "ProxyNotification": ("notification", CLIENT_TO_AGENT),
}
# x-side a def must carry, given the direction it is sent in and its kind
_EXPECTED_SIDE = {
    ("request", CLIENT_TO_AGENT): "agent",
    ("notification", CLIENT_TO_AGENT): "agent",
    ("response", AGENT_TO_CLIENT): "agent",
    ("request", AGENT_TO_CLIENT): "client",
    ("notification", AGENT_TO_CLIENT): "client",
    ("response", CLIENT_TO_AGENT): "client",
}
_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
    "uint16": (0, 2**16 - 1),
}


class SchemaBindingError(RuntimeError):
    """The schema's x-method/x-side annotations cannot be turned into a consistent binding."""


@dataclass(frozen=True)
class MethodBinding:
    """One method type: ``(method, kind)`` → ``$defs[def_name]``, sent in ``directions``."""

    method: str
    kind: str  # "request" | "response" | "notification"
    def_name: str
    side: str  # x-side: the side that handles the method ("agent" | "client" | "protocol")
    directions: frozenset[str]


@dataclass(frozen=True)
class Failure:
    """One schema violation, located precisely."""

    index: int
    direction: str
    kind: str
    method: str | None
    path: str
    message: str

    def __str__(self) -> str:
        method = self.method if self.method is not None else "?"
        return f"message #{self.index} {self.direction} {self.kind} {method!r}: at {self.path}: {self.message}"


@dataclass(frozen=True)
class Skipped:
    """A message that was deliberately not schema-checked, with the reason."""

    index: int
    direction: str
    kind: str
    method: str | None
    reason: str  # "extension" | "unknown-method" | "unchecked-direction" | "malformed-input"
    message: Any


@dataclass
class TranscriptReport:
    """Outcome of ``validate_transcript``."""

    checked: int = 0
    failures: list[Failure] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True if no failure was found."""
        return not self.failures

    @property
    def extensions(self) -> list[Skipped]:
        """Extension (``_``-prefixed) requests, notifications and their responses, for the caller to check."""
        return [s for s in self.skipped if s.reason == "extension"]

    def raise_for_failures(self, limit: int = 20) -> None:
        """Raise ``AssertionError`` listing the failures (first one first), if any."""
        if not self.failures:
            return
        lines = [str(f) for f in self.failures[:limit]]
        more = len(self.failures) - limit
        if more > 0:
            lines.append(f"… and {more} more")
        raise AssertionError(f"{len(self.failures)} ACP schema violation(s):\n" + "\n".join(lines))


def _int_format_checker() -> FormatChecker:
    checker = FormatChecker(formats=())
    for name, (low, high) in _INT_RANGES.items():

        def check(value: Any, low: int = low, high: int = high) -> bool:
            if isinstance(value, bool) or not isinstance(value, int):
                return True  # "type" reports non-integers
            return low <= value <= high

        checker.checks(name)(check)
    return checker


def _refs(node: Any) -> Iterable[str]:
    """Every ``#/$defs/X`` target referenced anywhere below ``node`` (not following refs)."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/$defs/"):
            yield ref[len("#/$defs/") :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def build_bindings(schema: Mapping[str, Any]) -> dict[tuple[str, str], MethodBinding]:
    """Build the ``(method, kind) → MethodBinding`` table from ``$defs`` (see module docstring)."""
    defs = schema["$defs"]
    annotated = {name: d for name, d in defs.items() if isinstance(d, dict) and "x-method" in d}
    found: dict[tuple[str, str], tuple[str, set[str]]] = {}

    def bind(def_name: str, kind: str, direction: str) -> None:
        d = annotated[def_name]
        key = (d["x-method"], kind)
        previous = found.get(key)
        if previous is not None and previous[0] != def_name:
            raise SchemaBindingError(f"{key} bound to both {previous[0]} and {def_name}")
        found.setdefault(key, (def_name, set()))[1].add(direction)

    for union, (kind, direction) in _UNIONS.items():
        if union not in defs:
            raise SchemaBindingError(f"routing union $defs/{union} missing")
        for target in _refs(defs[union]):
            if target not in annotated:
                continue  # RequestId, Error, Ext* …
            side = annotated[target].get("x-side")
            if side != _EXPECTED_SIDE[(kind, direction)] and side != "both":  # unstable: mcp/message
                raise SchemaBindingError(
                    f"$defs/{target} ({annotated[target]['x-method']}) is a {kind} sent {direction} "
                    f"via {union} but has x-side {side!r}"
                )
            bind(target, kind, direction)

    for union, (kind, direction) in _PROXY_UNIONS.items():
        for target in _refs(defs.get(union, {})):
            if target not in annotated:
                continue
            if annotated[target].get("x-side") != "proxy":
                raise SchemaBindingError(f"$defs/{target} is in {union} but has x-side "
                                         f"{annotated[target].get('x-side')!r}, not 'proxy'")
            bind(target, kind, direction)

    # protocol-level messages: referenced from the top-level anyOf, sendable by either side
    top = {k: v for k, v in schema.items() if k != "$defs"}
    for target in _refs(top):
        d = annotated.get(target)
        if d is None or d.get("x-side") != "protocol":
            continue
        kind = next((k for k in ("Request", "Response", "Notification") if target.endswith(k)), None)
        if kind is None:
            raise SchemaBindingError(f"cannot tell the kind of protocol-level $defs/{target}")
        for direction in DIRECTIONS:
            bind(target, kind.lower(), direction)

    bound_defs = {def_name for def_name, _ in found.values()}
    unbound = sorted(set(annotated) - bound_defs)
    if unbound:
        raise SchemaBindingError(f"defs with x-method not reachable from any routing union: {unbound}")

    return {
        key: MethodBinding(
            method=key[0],
            kind=key[1],
            def_name=def_name,
            side=annotated[def_name]["x-side"],
            directions=frozenset(directions),
        )
        for key, (def_name, directions) in found.items()
    }


def _json_path(prefix: str, path: Iterable[Any]) -> str:
    out = prefix
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.isidentifier():
            out += f".{part}"
        else:
            out += f"[{json.dumps(part)}]"
    return out


def _narrow(error: ValidationError) -> tuple[list[Any], str]:
    """The most specific (path, message) for ``error``, discriminator-aware.

    For ``oneOf``/``anyOf`` with a ``discriminator`` (SessionUpdate, ContentBlock,
    ToolCallContent, …) the branch is chosen by the discriminator value, so an unknown
    ``sessionUpdate`` is reported as such and a bad field inside a known kind is reported at that
    field. Otherwise it descends like ``jsonschema.exceptions.best_match``.
    """
    while error.context:
        schema = error.schema if isinstance(error.schema, dict) else {}
        disc = schema.get("discriminator")
        branches = schema.get(error.validator) if error.validator in ("oneOf", "anyOf") else None
        if isinstance(disc, dict) and isinstance(branches, list) and isinstance(error.instance, dict):
            prop = disc.get("propertyName")
            consts = [b.get("properties", {}).get(prop, {}).get("const") for b in branches]
            if prop not in error.instance:
                return list(error.absolute_path), f"missing discriminator {prop!r} (one of {consts})"
            value = error.instance[prop]
            if value not in consts:
                return (
                    [*error.absolute_path, prop],
                    f"unknown {prop} {value!r}; expected one of {consts}",
                )
            index = consts.index(value)
            sub = [e for e in error.context if e.relative_schema_path and e.relative_schema_path[0] == index]
            if not sub:
                break
            error = min(sub, key=relevance)
            continue
        smallest = sorted(error.context, key=relevance)[:2]
        if len(smallest) == 2 and relevance(smallest[0]) == relevance(smallest[1]):
            details = "; ".join(dict.fromkeys(e.message for e in error.context))
            return list(error.absolute_path), f"{error.message} ({details[:400]})"
        error = smallest[0]
    return list(error.absolute_path), error.message


class AcpSchema:
    """The loaded ACP schema, its method bindings and cached validators."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self.schema = schema
        self.bindings = build_bindings(schema)
        self._registry = Registry().with_resource(_SCHEMA_URI, Resource.from_contents(dict(schema)))
        self._format_checker = _int_format_checker()

    @functools.cache  # noqa: B019 - one instance per process, cached on purpose
    def validator(self, def_name: str) -> Draft202012Validator:
        """A validator for ``$defs[def_name]`` with ``$ref``s resolved inside the schema."""
        if def_name not in self.schema["$defs"]:
            raise KeyError(f"no $defs/{def_name} in the ACP schema")
        return Draft202012Validator(
            {"$ref": f"{_SCHEMA_URI}#/$defs/{def_name}"},
            registry=self._registry,
            format_checker=self._format_checker,
        )

    def binding(self, method: str, kind: str) -> MethodBinding | None:
        """The binding of ``method`` as a ``request``/``response``/``notification``, if any."""
        return self.bindings.get((method, kind))

    def errors(self, def_name: str, instance: Any, prefix: str = "$") -> list[tuple[str, str]]:
        """All ``(json path, message)`` violations of ``instance`` against ``$defs[def_name]``."""
        out = []
        for error in sorted(self.validator(def_name).iter_errors(instance), key=lambda e: list(e.absolute_path)):
            path, message = _narrow(error)
            out.append((_json_path(prefix, path), message))
        return out

    def check(self, def_name: str, instance: Any) -> None:
        """Raise ``AssertionError`` if ``instance`` violates ``$defs[def_name]``."""
        errors = self.errors(def_name, instance)
        if errors:
            raise AssertionError(
                f"not a valid {def_name}:\n" + "\n".join(f"at {path}: {message}" for path, message in errors)
            )


def load_schema(path: str | Path | None = None, *, verify_hash: bool = True) -> AcpSchema:
    """Load the ACP schema (default: the vendored copy, or ``$ACP_SCHEMA_PATH``).

    The vendored copy's sha256 is verified against ``SCHEMA_SHA256`` (the value PROTOCOL.md pins)
    unless ``verify_hash=False``. Results are cached per path.
    """
    chosen = Path(path or os.environ.get("ACP_SCHEMA_PATH") or SCHEMA_PATH).resolve()
    return _load_cached(str(chosen), verify_hash)


def load_unstable_schema() -> AcpSchema:
    """The vendored unstable schema of the same release (sha256 verified): validate transcripts
    that use unstable methods (``session/fork``) with ``validate_transcript(..., schema=…)``."""
    return _load_cached(str(UNSTABLE_SCHEMA_PATH.resolve()), True, UNSTABLE_SCHEMA_SHA256)


@functools.cache
def _load_cached(path: str, verify_hash: bool, expected: str = SCHEMA_SHA256) -> AcpSchema:
    data = Path(path).read_bytes()
    if verify_hash:
        digest = hashlib.sha256(data).hexdigest()
        if digest != expected:
            raise AssertionError(f"ACP schema {path} has sha256 {digest}, expected {expected}")
    return AcpSchema(json.loads(data))


def _field(item: Any, name: str, default: Any = None) -> Any:
    if isinstance(item, Mapping):
        return item.get(name, default)
    return getattr(item, name, default)


def _entry(item: Any) -> tuple[str, Any, bool]:
    """``(direction, message, parsed_ok)`` for a transcript entry (dict or WireMessage-like)."""
    direction = _field(item, "direction")
    if direction not in DIRECTIONS:
        raise ValueError(f"transcript entry with unknown direction {direction!r}: {item!r}")
    has_message = ("message" in item) if isinstance(item, Mapping) else hasattr(item, "message")
    if _field(item, "parse_error") is not None:
        return direction, None, False
    if has_message:
        return direction, _field(item, "message"), True
    raw = _field(item, "raw")
    if raw is None:
        raise ValueError(f"transcript entry has neither 'message' nor 'raw': {item!r}")
    message, error = parse_line(raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw)
    return direction, message, error is None


def _id_key(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


class _Checker:
    """One pass over a transcript (state: pending requests per direction)."""

    def __init__(self, schema: AcpSchema, check: Collection[str], unknown_methods: str) -> None:
        self.schema = schema
        self.check = set(check)
        self.unknown_methods = unknown_methods
        self.pending: dict[tuple[str, str], str] = {}  # (request direction, id) -> method
        self.report = TranscriptReport()

    def fail(self, index: int, direction: str, kind: str, method: str | None, path: str, message: str) -> None:
        if direction in self.check:
            self.report.failures.append(Failure(index, direction, kind, method, path, message))

    def skip(self, index: int, direction: str, kind: str, method: str | None, reason: str, message: Any) -> None:
        self.report.skipped.append(Skipped(index, direction, kind, method, reason, message))

    def validate(
        self, index: int, direction: str, kind: str, method: str, def_name: str, value: Any, prefix: str
    ) -> None:
        if direction not in self.check:
            return
        self.report.checked += 1
        for path, message in self.schema.errors(def_name, value, prefix):
            self.fail(index, direction, kind, method, path, f"{message} [{def_name}]")

    def run(self, messages: Iterable[Any]) -> TranscriptReport:
        for index, item in enumerate(messages):
            direction, message, parsed = _entry(item)
            if direction not in self.check:
                self.track_only(direction, message)
                self.skip(index, direction, "?", None, "unchecked-direction", message)
                continue
            self.one(index, direction, message, parsed)
        return self.report

    def track_only(self, direction: str, message: Any) -> None:
        """Keep request/response pairing right for a direction that is not checked."""
        if not isinstance(message, dict) or "id" not in message:
            return
        if isinstance(message.get("method"), str):
            self.pending[(direction, _id_key(message["id"]))] = message["method"]
        elif "result" in message or "error" in message:
            other = CLIENT_TO_AGENT if direction == AGENT_TO_CLIENT else AGENT_TO_CLIENT
            self.pending.pop((other, _id_key(message["id"])), None)

    def one(self, index: int, direction: str, message: Any, parsed: bool) -> None:
        if not parsed:
            self.fail(index, direction, "invalid", None, "$", "line is not JSON")
            return
        if isinstance(message, list):
            self.fail(index, direction, "invalid", None, "$", "JSON-RPC batch (array): ACP does not use batches")
            return
        if not isinstance(message, dict):
            self.fail(index, direction, "invalid", None, "$", f"not a JSON object: {message!r}")
            return
        if message.get("jsonrpc") != "2.0":
            self.fail(index, direction, "invalid", message.get("method"), "$.jsonrpc", 'must be "2.0"')
        if "method" in message:
            self.call(index, direction, message)
        elif "id" in message and ("result" in message or "error" in message):
            self.response(index, direction, message)
        else:
            self.fail(index, direction, "invalid", None, "$", "neither a request/notification nor a response")

    def call(self, index: int, direction: str, message: dict[str, Any]) -> None:
        method = message["method"]
        kind = "request" if "id" in message else "notification"
        if not isinstance(method, str):
            self.fail(index, direction, kind, None, "$.method", "method must be a string")
            return
        if kind == "request":
            for path, err in self.schema.errors("RequestId", message["id"], "$.id"):
                self.fail(index, direction, kind, method, path, err)
            key = (direction, _id_key(message["id"]))
            if key in self.pending:
                self.fail(index, direction, kind, method, "$.id", f"id {message['id']!r} reused while still pending")
            self.pending[key] = method
        if method.startswith("_"):
            self.skip(index, direction, kind, method, "extension", message)
            return
        binding = self.schema.binding(method, kind)
        if binding is None:
            if self.unknown_methods == "skip":
                self.skip(index, direction, kind, method, "unknown-method", message)
            else:
                other = self.schema.binding(method, "notification" if kind == "request" else "request")
                hint = f" (it is an ACP {other.kind}, not a {kind})" if other else ""
                self.fail(index, direction, kind, method, "$.method", f"unknown ACP {kind} method{hint}")
            return
        if direction not in binding.directions:
            self.fail(
                index,
                direction,
                kind,
                method,
                "$.method",
                f"{method} is handled by the {binding.side} (x-side) and cannot be sent {direction}",
            )
            return
        params = message.get("params", {})  # omitted params = no parameters
        self.validate(index, direction, kind, method, binding.def_name, params, "$.params")

    def response(self, index: int, direction: str, message: dict[str, Any]) -> None:
        rid = message["id"]
        if "result" in message and "error" in message:
            self.fail(index, direction, "response", None, "$", "response has both result and error")
            return
        request_direction = CLIENT_TO_AGENT if direction == AGENT_TO_CLIENT else AGENT_TO_CLIENT
        method = self.pending.pop((request_direction, _id_key(rid)), None)
        if "error" in message:
            self.validate(index, direction, "error", method or "?", "Error", message["error"], "$.error")
            if method is None and rid is not None:
                self.fail(index, direction, "error", None, "$.id", f"error response to unknown request id {rid!r}")
            return
        if method is None:
            self.fail(index, direction, "response", None, "$.id", f"response to unknown request id {rid!r}")
            return
        if method.startswith("_"):
            self.skip(index, direction, "response", method, "extension", message)
            return
        binding = self.schema.binding(method, "response")
        if binding is None:
            if self.unknown_methods == "skip":
                self.skip(index, direction, "response", method, "unknown-method", message)
            else:
                self.fail(index, direction, "response", method, "$.result", "result for an unknown ACP method")
            return
        self.validate(index, direction, "response", method, binding.def_name, message["result"], "$.result")


def validate_transcript(
    messages: Iterable[Any],
    *,
    check: Collection[str] = DIRECTIONS,
    unknown_methods: str = "fail",
    collect: bool = False,
    schema: AcpSchema | None = None,
) -> TranscriptReport:
    """Validate a JSON-RPC transcript (both directions) against the ACP schema.

    ``messages``: in wire order; each a mapping ``{"direction": "agent->client" | "client->agent",
    "message": <parsed JSON>}`` (or ``"raw": <line>`` instead of ``message``), or any object with
    ``direction`` and ``message`` attributes such as ``transcript.WireMessage``.

    ``check``: the directions whose messages are schema-checked. Requests of an unchecked direction
    are still tracked so that responses to them can be paired (e.g. ``check={AGENT_TO_CLIENT}``
    when a test deliberately sends invalid params but the agent's answers must still be valid).

    ``unknown_methods``: ``"fail"`` (default) or ``"skip"`` for non-extension methods that are not
    in the schema. Extension methods (``_…``) are always skipped and returned in
    ``report.extensions``.

    Requests without ``params`` are validated as ``{}``. Error responses are validated against
    ``$defs/Error`` (``id: null`` allowed, e.g. for ``-32700``).

    Raises ``AssertionError`` listing every failure (first one first) unless ``collect=True``;
    returns the ``TranscriptReport``.
    """
    if unknown_methods not in ("fail", "skip"):
        raise ValueError("unknown_methods must be 'fail' or 'skip'")
    bad = set(check) - set(DIRECTIONS)
    if bad:
        raise ValueError(f"unknown direction(s) in check: {sorted(bad)}")
    report = _Checker(schema or load_schema(), check, unknown_methods).run(messages)
    if not collect:
        report.raise_for_failures()
    return report
