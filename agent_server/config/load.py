"""Configuration: a TOML file plus environment variables, resolved into one provider setting.

Role: find and parse the config file (``--config PATH``, else ``<XDG config>/agent-server/
config.toml``), apply the environment, and pick a named provider profile. Profiles differ only in
base URL, API-key variable, default model, context window and known quirks.

Must never: log or persist an API key (``ProviderSettings.api_key`` is excluded from dumps), or
fail at start-up for a missing key: that is reported on the first prompt, as a clear error.

Precedence, highest first: ``AGENT_SERVER_*`` environment variables → the config file → the
usual provider variables (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``, ``DEEPSEEK_API_KEY``, the
profile's own key variable) → what ``agent-server login`` stored (``credentials``) → the
profile's defaults.

Whether a profile needs a key: its ``key_required`` when set; otherwise it needs one unless its
base URL is on this machine (``localhost``, ``127.0.0.0/8``, ``::1``: Ollama, llama.cpp, the
offline endpoint).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# the resolution itself is standard library only (the CLI's session/new fast path uses it too)
from agent_server.config.resolve import (  # noqa: F401
    BUILTIN_PROFILES,
    ConfigError,
    check_base_url as _check_base_url,
    config_text,
    context_window as _context_window,
    default_config_path,
    is_local,
    key_needed,
    policy_env as _policy_env,
    redact_url,
    resolve_provider,
    stored_key as _stored_key,
)
from agent_server.config.views import DEFAULT_MODE


class Profile(BaseModel):
    """A named provider: where it lives and how it differs from plain OpenAI."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base_url: str | None = None
    api_key_env: str | None = None
    """Environment variable holding the key; ``None`` for local servers that need none."""
    model: str | None = None
    context_window: int = 32_768
    """Tokens the model accepts in one request (prompt + completion)."""
    reasoning_content: Literal["echo", "drop"] = "drop"
    """``echo``: send earlier ``reasoning_content`` back byte-exact (DeepSeek thinking mode with
    tools rejects a request without it); ``drop``: leave it out (other providers)."""
    key_required: bool | None = None
    """Whether requests need an API key; ``None``: yes, unless the base URL is on this machine."""


PROFILES: dict[str, Profile] = {name: Profile(**fields) for name, fields in BUILTIN_PROFILES.items()}
"""Built-in profiles. ``custom`` is any OpenAI-compatible endpoint given by ``base_url``."""


class Switch(BaseModel):
    """A model's on/off request parameter, offered as a boolean config option (``[models.switches.ID]``):
    ``on`` / ``off`` are the request-body parameters each value sends; ``default`` the value a
    session starts with; ``name`` / ``description`` what the editor shows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    description: str | None = None
    on: dict[str, Any] = {}
    off: dict[str, Any] = {}
    default: bool = False


class ProviderSettings(BaseModel):
    """The resolved provider for a session. ``api_key`` never appears in ``model_dump()``."""

    model_config = ConfigDict(frozen=True)

    profile: str
    base_url: str | None
    model: str | None
    context_window: int
    reasoning_content: Literal["echo", "drop"]
    key_required: bool
    api_key: str | None = Field(default=None, exclude=True, repr=False)
    api_key_env: str | None = None
    """The variable the profile reads its key from (for messages: "set DEEPSEEK_API_KEY")."""
    api_key_source: str | None = None
    """Where the key came from (a variable or file name) — safe to show the user, never the key."""
    key_store: Literal["keyring"] | None = None
    """``"keyring"``: no key was found elsewhere but ``agent-server login`` put one in the system
    keyring; it is fetched (``credentials.keyring_get``) when first needed, not at start-up."""
    reasoning_effort: tuple[str, ...] = ()
    """The reasoning-effort levels the model takes (``[[models]] reasoning_effort``): offered as the
    ``thought_level`` config option; ``()``: the model has no such parameter."""
    reasoning_effort_param: str = "reasoning_effort"
    """The request-body field a level goes to (OpenAI's chat completions: ``reasoning_effort``)."""
    switches: dict[str, Switch] = {}
    """The model's boolean config options by id (``[models.switches.ID]``)."""
    vision: bool = Field(default=False, strict=True)
    """Whether the model takes images in prompts (``vision = true`` at the top of the config file for
    the default model, or on a ``[[models]]`` entry): ``promptCapabilities.image`` is advertised then."""


class Price(BaseModel):
    """What a model costs, per million tokens: ``input`` (prompt tokens the provider computed),
    ``cached_input`` (prompt tokens its prefix cache served; ``None``: as ``input``) and ``output``
    (completion)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    currency: str = "USD"
    """ISO 4217 code, sent as ``cost.currency`` in ``usage_update``."""


class AgentSettings(BaseModel):
    """Settings of the agent loop, with their defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_steps_per_turn: int = Field(default=50, ge=1)
    """Model requests one turn may make before it ends with ``max_turn_requests``."""
    max_attempts: int = Field(default=4, ge=1)
    """HTTP tries of one step (the first try included) for retryable errors."""
    retry_base_delay: float = Field(default=1.0, ge=0)
    """Seconds before the first retry; doubled each time, with jitter, capped at ``retry_max_delay``."""
    retry_max_delay: float = Field(default=30.0, ge=0)
    stream_idle_timeout: float = Field(default=300.0, gt=0)
    """Seconds of silence (not even an SSE comment) after which a stream fails as ``STREAM_IDLE``."""
    no_progress_timeout: float = Field(default=300.0, gt=0)
    """Seconds without model output (SSE comments, pings and empty deltas do not count) after
    which an attempt fails as ``NETWORK`` (retryable)."""
    attempt_timeout: float = Field(default=600.0, gt=0)
    """Seconds one model request (one attempt) may take in all, however steadily it streams;
    then it fails as ``NETWORK`` (retryable)."""
    max_output_chars: int = Field(default=4_000_000, ge=1)
    """Characters of output (text, reasoning, tool calls) one attempt may stream before it is
    stopped as ``NETWORK`` (retryable)."""
    max_tool_calls_per_step: int = Field(default=64, ge=1)
    """Tool calls one model answer may make; the calls past it are dropped unrun (logged in the
    ``assistant`` event's ``dropped_tool_calls``) and one notice tells the model how many."""
    max_spill_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    """Bytes of one ``bash`` call's output saved to its spill file (the session's ``spill/``
    folder) when it is too big for the result; the rest is read and dropped, and the result says
    how many bytes. ``0``: never spill."""
    checkpoint_max_file_bytes: int = Field(default=10 * 1024 * 1024, ge=0)
    """Files larger than this are never copied into checkpoints (the shadow repository, the blob
    store): they are recorded by size, mtime and hash, and ``/undo`` says it cannot take them back."""
    max_session_spill_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    """Bytes the spill files of one session may hold in all; a spill that would pass it saves only
    what is left (nothing once it is used up: spill files are never pruned, the history points at
    them), and the result says so."""
    mcp_start_wait: float = Field(default=5.0, ge=0)
    """Seconds the first prompt waits for MCP servers still starting (they never block session/new)."""
    mcp_call_timeout: float = Field(default=120.0, gt=0)
    """Seconds one MCP tool call may take before it fails (the call is cancelled on the server)."""
    max_tools: int = Field(default=128, ge=1)
    """Tools offered to the model in all: the built-in tools first, then MCP tools in the order of
    ``mcpServers`` and of each server's list, up to this many; the user is told which were left out."""
    params: dict[str, Any] = {}
    """Extra request-body parameters sent to the model (``temperature``, ``max_tokens`` …)."""
    chars_per_token: float = Field(default=4.0, gt=0)
    """Characters per token for the estimate made before each request (until the provider's
    ``usage`` of an earlier request is known; then that is trusted plus what was added since)."""
    compact_threshold: float = Field(default=0.8, gt=0, lt=1)
    """Compact the history before a request whose estimate passes this share of the window."""
    keep_ratio: float = Field(default=0.16, gt=0, lt=1)
    """Share of the history (by estimated tokens) kept verbatim after the checkpoint."""
    price_per_million: Price | None = None
    """Price of every model (``{input = 0.27, cached_input = 0.07, output = 1.10, currency = "USD"}``): ``usage_update``
    then carries the session's cumulative ``cost``. ``None``: no cost is reported."""
    model_prices: dict[str, Price] = {}
    """Model id → price, overriding ``price_per_million`` for that model."""
    max_image_bytes: int = Field(default=5 * 1024 * 1024, ge=1)
    """Bytes one prompt image may have (decoded); a larger one is refused with an error naming this
    limit (images are not resized: no image library is a dependency)."""
    image_tokens: int = Field(default=1_600, ge=0)
    """Tokens one image counts for in the context estimate (its base64 length never does): about
    what a provider charges for a picture of up to about 1.15 megapixels."""

    def price_for(self, model: str | None) -> Price | None:
        """The configured price of ``model`` (its own, else the default), or ``None``."""
        return self.model_prices.get(model or "", self.price_per_million)


DEFAULT_SECRET_PATTERNS = [".env*", "~/.ssh/**", "~/.aws/**", "~/.netrc", "*.pem", "*id_rsa*", "*id_ed25519*",
                           "*id_ecdsa*", "*id_dsa*"]


class PolicySettings(BaseModel):
    """The ``[policy]`` table: modes, approvals and the shell sandbox (DESIGN.md §7), with defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_mode: Literal["read-only", "workspace-write", "accept-edits", "danger-full-access"] = DEFAULT_MODE
    """The mode a new session starts in (the editor can switch it with ``session/set_mode``)."""
    approval_timeout: float = Field(default=600.0, gt=0)
    """Seconds to wait for the user's answer to a permission request before denying, or to an
    edit proposal before withdrawing it (env ``AGENT_SERVER_APPROVAL_TIMEOUT``)."""
    sandbox: Literal["auto", "off"] = "auto"
    """``auto``: confine the shell with Linux Landlock when this machine enforces it; ``off``: never
    (every shell command then asks). Env ``AGENT_SERVER_SANDBOX``."""
    network: Literal["ask"] | bool = "ask"
    """``"ask"`` (the default): sandboxed shell commands run with the network cut (a private network
    namespace, no TCP, UDP or unix sockets), and a command that fails as if it needed the network
    asks the user to run it again with it — "always" remembers the command's prefix for the
    session; ``true``: they have the network (the session's first one says so); ``false``: never.
    Where the network cannot be cut, ``"ask"`` runs commands with it and says so. Env
    ``AGENT_SERVER_NETWORK`` (``ask``, ``0``/``1``)."""
    secret_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_PATTERNS))
    """Files whose reading (or writing) asks first: a name glob, or a path glob with ``~`` and ``**``."""
    mcp_trusted: list[str] = []
    """MCP servers (by the name the client gives them) whose tool annotations are believed: their
    ``readOnlyHint`` tools run without asking, others ask once per tool, ``destructiveHint`` always.
    Every other server's calls ask each time, showing the arguments."""
    read_allowed: list[str] = []
    """Files and folders outside the workspace that ``read``/``grep``/``glob`` open without asking
    (e.g. ``~/.cargo/registry``, ``/usr/include``; ``~`` expanded, links resolved). Any other read
    that resolves outside the roots asks (once per file, or always for its folder); credential
    stores and secret files stay refused or asked. Env ``AGENT_SERVER_READ_ALLOWED`` (joined by ``:``)."""
    sandbox_writable: list[str] = []
    """Extra folders the sandboxed shell may write in ``workspace-write`` (e.g. ``~/.cache``)."""
    shell_env_allow: list[str] = []
    """Variables the shell, ``rg`` and MCP servers keep although their name or value says they hold a
    credential (``*_API_KEY``, ``*SECRET*``, ``*_TOKEN``, ``PGPASSWORD``, a URL with ``user:password@`` …;
    ``tools.child_env``). The model's own key never reaches them."""


class AcpSettings(BaseModel):
    """The ``[acp]`` table: what the server sends its ACP client, for clients that stumble on part
    of stable ACP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_info_update: bool = True
    """``false``: never send ``session_info_update`` (the session title after the first turn);
    Toad ≤ 0.6.20 rejects it and agent-shell ≤ 0.48 prints it into the transcript."""

    config_option_update: bool | None = None
    """``false``: never send ``config_option_update`` after a mode or model change (the answer to
    ``session/set_config_option`` still carries the options; ``current_mode_update`` still goes);
    Toad rejects it. Unset: follows ``session_info_update`` — the one switch for old clients."""

    @property
    def sends_config_option_update(self) -> bool:
        """Whether ``config_option_update`` is sent (see ``config_option_update``)."""
        return self.session_info_update if self.config_option_update is None else self.config_option_update


class ModelEntry(BaseModel):
    """One ``[[models]]`` table of the config file: a model the user may pick for a session.

    ``id``: the model id sent to the endpoint; ``name``: the label shown in the editor (default
    ``id``); ``profile``: the provider it is served by (default: the configured profile, with its
    base URL and key); ``base_url`` / ``api_key_env``: override that profile's; ``context_window``
    (tokens) and ``reasoning_content``: override the profile's; ``price``: per million tokens;
    ``reasoning_effort`` (levels) and ``reasoning_effort_param`` (the body field), ``switches``
    (boolean options): the model's config options (``host.options``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    profile: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    context_window: int | None = Field(default=None, gt=0)
    reasoning_content: Literal["echo", "drop"] | None = None
    price: Price | None = None
    reasoning_effort: list[str] | None = None
    """Levels of the model's reasoning-effort parameter (``["low", "medium", "high"]``): the
    session's ``thought_level`` config option; ``default`` (not sent) is always offered first."""
    reasoning_effort_param: str = "reasoning_effort"
    switches: dict[str, Switch] = {}
    vision: bool | None = Field(default=None, strict=True)
    """Whether the model takes images (default: false; the default model's entry: the top-level ``vision``)."""


class ModelChoice(BaseModel):
    """A model a session can use: ``id`` (sent as ``model``), ``name`` (label), ``description``,
    and the resolved ``provider`` it goes to (``provider.model == id``)."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    description: str | None = None
    provider: ProviderSettings


class Config(BaseModel):
    """The whole configuration: ``provider`` + ``agent`` + ``policy`` + ``acp`` + where it was read from.

    ``models``: the models a session may switch to (the default ``provider.model`` first, then the
    config file's ``[[models]]``); empty when no model is configured at all.
    """

    model_config = ConfigDict(frozen=True)

    provider: ProviderSettings
    agent: AgentSettings
    policy: PolicySettings = Field(default_factory=PolicySettings)
    acp: AcpSettings = Field(default_factory=AcpSettings)
    source: str | None = None
    models: tuple[ModelChoice, ...] = ()
    profiles: dict[str, Profile] = Field(default_factory=lambda: dict(PROFILES))
    """Every profile known: the built-in ones and the config file's ``[profiles.NAME]``."""

    @property
    def accepts_images(self) -> bool:
        """Whether a configured model takes images (``promptCapabilities.image``): the default
        model or a ``[[models]]`` entry with ``vision = true`` (``config.resolve.vision_configured``
        says the same from the file alone, for the fast ``initialize``)."""
        return self.provider.vision or any(c.provider.vision for c in self.models)

    def model_choice(self, model_id: str | None) -> ModelChoice | None:
        """The listed model ``model_id``, or ``None`` when it is not listed."""
        return next((c for c in self.models if c.id == model_id), None)

    def provider_for(self, model_id: str | None) -> ProviderSettings:
        """Where a request for ``model_id`` goes: its listed provider; a model that is not listed
        (e.g. a session logged under an older config) goes to the default provider."""
        choice = self.model_choice(model_id)
        if choice is not None:
            return choice.provider
        if model_id is None or model_id == self.provider.model:
            return self.provider
        return self.provider.model_copy(update={"model": model_id})


_RESERVED_PARAMS = frozenset({"model", "messages", "stream", "stream_options", "tools"})

_FILE_KEYS = {"profile", "base_url", "model", "api_key", "api_key_env", "context_window",
              "reasoning_content", "agent", "params", "profiles", "policy", "models", "acp", "vision"}


def _parse_toml(path: Path, text: str) -> dict[str, Any]:
    """The TOML document ``text`` of ``path``; ``ConfigError`` when it does not parse. An empty
    file is ``{}`` without loading the TOML parser (its regexes cost milliseconds at start-up)."""
    if not text.strip():
        return {}
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Config:
    """Read the config file (``path``, else the default if it exists) and the environment.

    Raises ``ConfigError`` for an unreadable file, unknown keys or invalid values. A missing key or
    base URL is not an error here: ``ProviderSettings`` records what is missing.
    """
    env = os.environ if env is None else env
    from agent_server.config import credentials

    try:
        signin = credentials.read(env)
    except credentials.CredentialsError as exc:
        raise ConfigError(str(exc)) from None
    path, text = config_text(path, env)
    data: dict[str, Any] = {}
    if text is not None:
        data = _parse_toml(path, text)
        unknown = set(data) - _FILE_KEYS
        if unknown:
            raise ConfigError(f"{path}: unknown keys {sorted(unknown)}; known: {sorted(_FILE_KEYS)}")
    where = f"{path}: " if data else ""
    table = "[agent]"
    try:
        agent = AgentSettings(**{**data.get("agent", {}), **({"params": data["params"]} if "params" in data else {})})
        profiles = dict(PROFILES)
        for name, raw in data.get("profiles", {}).items():
            table = f"[profiles.{name}]"
            profiles[name] = Profile(**raw)
        table = ""
        provider = ProviderSettings(**resolve_provider(data, profiles, env, signin), vision=data.get("vision", False))
        table = "[policy]"
        policy = PolicySettings(**{**data.get("policy", {}), **_policy_env(env)})
        table = "[[models]]"
        raw_models = data.get("models", [])
        if not isinstance(raw_models, list):
            raise ConfigError(f"{path}: models must be an array of tables ([[models]] with an id each)")
        entries = [ModelEntry(**raw) for raw in raw_models]
        models = _resolve_models(entries, provider, profiles, env, signin)
        table = "[acp]"
        acp = AcpSettings(**data.get("acp", {}))
    except ConfigError as exc:
        if table == "" and str(exc).startswith("unknown profile"):  # name where the name came from
            source = ("AGENT_SERVER_PROFILE" if env.get("AGENT_SERVER_PROFILE")
                      else f"{path} (profile)" if data.get("profile") is not None else None)
            if source is not None:
                raise ConfigError(f"{source}: {exc}") from None
        if table == "[[models]]" and data and not str(exc).startswith(str(path)):
            raise ConfigError(f"{path}: {exc}") from None
        raise
    except ValidationError as exc:  # one line: "[policy] default_mode: Input should be … (got 'yolo')"
        raise ConfigError(where + "; ".join(_one_error(table, e) for e in exc.errors(include_url=False))) from None
    except Exception as exc:  # TypeError from bad tables
        raise ConfigError(where + " ".join(str(exc).split())) from None
    reserved = _RESERVED_PARAMS & set(agent.params)
    if reserved:
        raise ConfigError(f"{path}: params may not set {sorted(reserved)}: agent-server sets those itself")
    if models and models[0].id == provider.model:
        provider = models[0].provider  # the default model's own entry refines it (window, label)
    prices = {e.id: e.price for e in entries if e.price is not None and e.id not in agent.model_prices}
    if prices:
        agent = agent.model_copy(update={"model_prices": {**agent.model_prices, **prices}})
    return Config(provider=provider, agent=agent, policy=policy, acp=acp, source=str(path) if data else None,
                  models=models, profiles=profiles)


def _resolve_models(entries: list[ModelEntry], default: ProviderSettings, profiles: dict[str, Profile],
                    env: Mapping[str, str], signin: Mapping[str, Any]) -> tuple[ModelChoice, ...]:
    """The default model first (when there is one), then each ``[[models]]`` entry; an entry with
    the default's id refines the default (label, window, price). Raises ``ConfigError`` for a
    repeated id, an unknown profile or a bad base URL."""
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise ConfigError(f"model {entry.id!r} is listed twice under [[models]]")
        seen.add(entry.id)
    choices: list[ModelChoice] = []
    if default.model and default.model not in seen:
        choices.append(ModelChoice(id=default.model, name=default.model, provider=default))
    for entry in entries:
        if entry.profile is None or entry.profile == default.profile:
            base = default.model_copy(update={"model": entry.id})
            if entry.base_url:
                _check_base_url(entry.base_url)
                base = base.model_copy(update={"base_url": entry.base_url.rstrip("/")})
        else:
            if entry.profile not in profiles:
                raise ConfigError(f"model {entry.id!r}: unknown profile {entry.profile!r}; known: {sorted(profiles)}")
            profile = profiles[entry.profile]
            base_url = entry.base_url or profile.base_url
            if base_url:
                _check_base_url(base_url)
            key_env = entry.api_key_env or profile.api_key_env
            key = env.get(key_env) if key_env else None
            source, store = (key_env if key else None), None
            if not key:
                key, source, store = _stored_key(signin, entry.profile)
            base = ProviderSettings(
                profile=entry.profile, base_url=base_url.rstrip("/") if base_url else None, model=entry.id,
                context_window=profile.context_window, reasoning_content=profile.reasoning_content,
                key_required=key_needed(profile, base_url), api_key=key.strip() if key else None,
                api_key_env=key_env, api_key_source=source, key_store=store)
        if entry.api_key_env and entry.api_key_env != base.api_key_env:
            key = env.get(entry.api_key_env)
            base = base.model_copy(update={"api_key_env": entry.api_key_env, "api_key": key.strip() if key else None,
                                           "api_key_source": entry.api_key_env if key else None, "key_store": None})
        update: dict[str, Any] = _option_settings(entry)
        update["vision"] = entry.vision if entry.vision is not None else (entry.id == default.model and default.vision)
        if entry.context_window is not None:
            update["context_window"] = entry.context_window
        if entry.reasoning_content is not None:
            update["reasoning_content"] = entry.reasoning_content
        choice = ModelChoice(id=entry.id, name=entry.name or entry.id, description=entry.description,
                             provider=base.model_copy(update=update) if update else base)
        if entry.id == default.model:
            choices.insert(0, choice)
        else:
            choices.append(choice)
    return tuple(choices)


OPTION_IDS = frozenset({"mode", "model", "thought_level"})
"""Config option ids a switch may not take."""


def _option_settings(entry: ModelEntry) -> dict[str, Any]:
    """The ``ProviderSettings`` fields of ``entry``'s config options; ``ConfigError`` for levels
    that are empty, repeated or named ``default``, a switch that takes a reserved id, or a body
    parameter agent-server sets itself."""
    where = f"model {entry.id!r}"
    fields: dict[str, Any] = {}
    if entry.reasoning_effort is not None:
        levels = entry.reasoning_effort
        if not levels or len(set(levels)) != len(levels) or "default" in levels or not all(levels):
            raise ConfigError(f"{where}: reasoning_effort must list distinct levels (e.g. [\"low\", \"medium\", "
                              f"\"high\"]), none of them empty or \"default\" (always offered: nothing is sent)")
        fields["reasoning_effort"] = tuple(levels)
    params = [entry.reasoning_effort_param] if entry.reasoning_effort is not None else []
    for name, switch in entry.switches.items():
        if name in OPTION_IDS or not name:
            raise ConfigError(f"{where}: switch id {name!r} is taken; pick another (not {sorted(OPTION_IDS)})")
        params += [*switch.on, *switch.off]
    reserved = _RESERVED_PARAMS & set(params)
    if reserved:
        raise ConfigError(f"{where}: its options may not set {sorted(reserved)}: agent-server sets those itself")
    if entry.reasoning_effort is not None:
        fields["reasoning_effort_param"] = entry.reasoning_effort_param
    if entry.switches:
        fields["switches"] = dict(entry.switches)
    return fields


def _one_error(table: str, error: Mapping[str, Any]) -> str:
    """One pydantic error as ``[table] key: message (got value)`` on one line."""
    key = ".".join(str(p) for p in error.get("loc", ()))
    got = f" (got {error['input']!r})" if not isinstance(error.get("input"), (dict, list)) else ""
    where = " ".join(p for p in (table, key) if p)
    return " ".join(f"{where}: {error.get('msg', 'invalid')}{got}".split())
