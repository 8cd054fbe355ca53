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

import ipaddress
import os
from pathlib import Path
from typing import Any, Literal, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError


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


PROFILES: dict[str, Profile] = {
    "deepseek": Profile(base_url="https://api.deepseek.com/v1", api_key_env="DEEPSEEK_API_KEY",
                        model="deepseek-chat", context_window=128_000, reasoning_content="echo"),
    "openai": Profile(base_url="https://api.openai.com/v1", api_key_env="OPENAI_API_KEY",
                      model="gpt-4o", context_window=128_000),
    "glm": Profile(base_url="https://open.bigmodel.cn/api/paas/v4", api_key_env="ZHIPUAI_API_KEY",
                   model="glm-4.6", context_window=200_000, reasoning_content="echo"),
    "hunyuan": Profile(base_url="https://api.hunyuan.cloud.tencent.com/v1", api_key_env="HUNYUAN_API_KEY",
                       model="hunyuan-turbos-latest", context_window=32_000),
    "openrouter": Profile(base_url="https://openrouter.ai/api/v1", api_key_env="OPENROUTER_API_KEY",
                          model="deepseek/deepseek-chat", context_window=128_000),
    "ollama": Profile(base_url="http://127.0.0.1:11434/v1", model="qwen2.5-coder",
                      context_window=32_768, key_required=False),
    "vllm": Profile(base_url="http://127.0.0.1:8000/v1", api_key_env="VLLM_API_KEY",
                    context_window=32_768, key_required=False),
    "llama.cpp": Profile(base_url="http://127.0.0.1:8080/v1", model="local",
                         context_window=32_768, key_required=False),
    "custom": Profile(api_key_env="OPENAI_API_KEY", key_required=False),
}
"""Built-in profiles. ``custom`` is any OpenAI-compatible endpoint given by ``base_url``."""


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


class Price(BaseModel):
    """What a model costs, per million tokens: ``input`` (prompt) and ``output`` (completion)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
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
    max_spill_bytes: int = Field(default=16 * 1024 * 1024, ge=0)
    """Bytes of one ``bash`` call's output saved to its spill file (the session's ``spill/``
    folder) when it is too big for the result; the rest is read and dropped, and the result says
    how many bytes. ``0``: never spill."""
    max_session_spill_bytes: int = Field(default=256 * 1024 * 1024, ge=0)
    """Bytes the spill files of one session may hold in all; a spill that would pass it saves only
    what is left (nothing once it is used up: spill files are never pruned, the history points at
    them), and the result says so."""
    mcp_start_wait: float = Field(default=5.0, ge=0)
    """Seconds the first prompt waits for MCP servers still starting (they never block session/new)."""
    mcp_call_timeout: float = Field(default=120.0, gt=0)
    """Seconds one MCP tool call may take before it fails (the call is cancelled on the server)."""
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
    """Price of every model (``{input = 0.27, output = 1.10, currency = "USD"}``): ``usage_update``
    then carries the session's cumulative ``cost``. ``None``: no cost is reported."""
    model_prices: dict[str, Price] = {}
    """Model id → price, overriding ``price_per_million`` for that model."""

    def price_for(self, model: str | None) -> Price | None:
        """The configured price of ``model`` (its own, else the default), or ``None``."""
        return self.model_prices.get(model or "", self.price_per_million)


DEFAULT_SECRET_PATTERNS = [".env*", "~/.ssh/**", "~/.aws/**", "~/.netrc", "*.pem", "*id_rsa*"]


class PolicySettings(BaseModel):
    """The ``[policy]`` table: modes, approvals and the shell sandbox (DESIGN.md §7), with defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    default_mode: Literal["read-only", "workspace-write", "danger-full-access"] = "workspace-write"
    """The mode a new session starts in (the editor can switch it with ``session/set_mode``)."""
    approval_timeout: float = Field(default=600.0, gt=0)
    """Seconds to wait for the user's answer to a permission request before denying (env
    ``AGENT_SERVER_APPROVAL_TIMEOUT``)."""
    sandbox: Literal["auto", "off"] = "auto"
    """``auto``: confine the shell with Linux Landlock when this machine enforces it; ``off``: never
    (every shell command then asks). Env ``AGENT_SERVER_SANDBOX``."""
    network: bool = True
    """``false``: sandboxed shell commands get no TCP access (Landlock ABI ≥ 4; UDP is not covered).
    Env ``AGENT_SERVER_NETWORK`` (``0``/``1``)."""
    secret_patterns: list[str] = Field(default_factory=lambda: list(DEFAULT_SECRET_PATTERNS))
    """Files whose reading (or writing) asks first: a name glob, or a path glob with ``~`` and ``**``."""
    mcp_trusted: list[str] = []
    """MCP servers (by the name the client gives them) whose tool annotations are believed: their
    ``readOnlyHint`` tools run without asking, others ask once per tool, ``destructiveHint`` always.
    Every other server's calls ask each time, showing the arguments."""
    sandbox_writable: list[str] = []
    """Extra folders the sandboxed shell may write in ``workspace-write`` (e.g. ``~/.cache``)."""


class AcpSettings(BaseModel):
    """The ``[acp]`` table: what the server sends its ACP client, for clients that stumble on part
    of stable ACP."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_info_update: bool = True
    """``false``: never send ``session_info_update`` (the session title after the first turn);
    Toad ≤ 0.6.20 rejects it and agent-shell ≤ 0.48 prints it into the transcript."""


class ModelEntry(BaseModel):
    """One ``[[models]]`` table of the config file: a model the user may pick for a session.

    ``id``: the model id sent to the endpoint; ``name``: the label shown in the editor (default
    ``id``); ``profile``: the provider it is served by (default: the configured profile, with its
    base URL and key); ``base_url`` / ``api_key_env``: override that profile's; ``context_window``
    (tokens) and ``reasoning_content``: override the profile's; ``price``: per million tokens.
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


class ConfigError(Exception):
    """The config file cannot be read or has invalid keys (message names file and key)."""


_RESERVED_PARAMS = frozenset({"model", "messages", "stream", "stream_options", "tools"})

_FILE_KEYS = {"profile", "base_url", "model", "api_key", "api_key_env", "context_window",
              "reasoning_content", "agent", "params", "profiles", "policy", "models", "acp"}


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/agent-server/config.toml``, else platformdirs' user config folder."""
    env = os.environ if env is None else env
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "agent-server" / "config.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir("agent-server")) / "config.toml"


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
    from agent_server import credentials

    try:
        signin = credentials.read(env)
    except credentials.CredentialsError as exc:
        raise ConfigError(str(exc)) from None
    explicit = path is not None or bool(env.get("AGENT_SERVER_CONFIG"))
    path = Path(path or env.get("AGENT_SERVER_CONFIG") or default_config_path(env))
    data: dict[str, Any] = {}
    if path.exists() or explicit:
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from None
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
        provider = _resolve_provider(data, profiles, env, signin)
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
    except ConfigError:
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
        update: dict[str, Any] = {}
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


def _one_error(table: str, error: Mapping[str, Any]) -> str:
    """One pydantic error as ``[table] key: message (got value)`` on one line."""
    key = ".".join(str(p) for p in error.get("loc", ()))
    got = f" (got {error['input']!r})" if not isinstance(error.get("input"), (dict, list)) else ""
    where = " ".join(p for p in (table, key) if p)
    return " ".join(f"{where}: {error.get('msg', 'invalid')}{got}".split())


def _policy_env(env: Mapping[str, str]) -> dict[str, Any]:
    """``[policy]`` values from ``AGENT_SERVER_SANDBOX``, ``AGENT_SERVER_APPROVAL_TIMEOUT``,
    ``AGENT_SERVER_NETWORK`` (validated by ``PolicySettings``)."""
    out: dict[str, Any] = {}
    if env.get("AGENT_SERVER_SANDBOX"):
        out["sandbox"] = env["AGENT_SERVER_SANDBOX"].strip().lower()
    if env.get("AGENT_SERVER_APPROVAL_TIMEOUT"):
        out["approval_timeout"] = env["AGENT_SERVER_APPROVAL_TIMEOUT"].strip()
    if env.get("AGENT_SERVER_NETWORK"):
        out["network"] = env["AGENT_SERVER_NETWORK"].strip().lower() in ("1", "true", "yes", "on")
    return out


def _resolve_provider(data: dict[str, Any], profiles: dict[str, Profile], env: Mapping[str, str],
                      signin: Mapping[str, Any]) -> ProviderSettings:
    name = env.get("AGENT_SERVER_PROFILE") or data.get("profile")
    base_override = env.get("AGENT_SERVER_BASE_URL") or data.get("base_url")
    if name is None:
        if base_override or env.get("OPENAI_BASE_URL"):
            name = "custom"
        elif isinstance(signin.get("profile"), str) and signin["profile"] in profiles:
            name = signin["profile"]  # the profile `agent-server login` chose last
        elif env.get("DEEPSEEK_API_KEY"):
            name = "deepseek"
        elif env.get("OPENAI_API_KEY"):
            name = "openai"
        else:
            name = "custom"
    if name not in profiles:
        raise ConfigError(f"unknown profile {name!r}; known: {sorted(profiles)}")
    profile = profiles[name]
    from agent_server import credentials

    stored = credentials.entry(signin, name)
    base_url = (base_override or (env.get("OPENAI_BASE_URL") if name in ("custom", "openai") else None)
                or stored.get("base_url") or profile.base_url)
    key_env = data.get("api_key_env") or profile.api_key_env
    api_key, source, store = None, None, None
    for candidate, label in (
        (env.get("AGENT_SERVER_API_KEY"), "AGENT_SERVER_API_KEY"),
        (data.get("api_key"), "config file"),
        (env.get(key_env) if key_env else None, key_env),
    ):
        if candidate:
            api_key, source = candidate, label
            break
    else:
        api_key, source, store = _stored_key(signin, name)
    if api_key is not None:
        api_key = api_key.strip()
        if not api_key.isascii() or not api_key.isprintable() or " " in api_key:
            raise ConfigError(f"the API key from {source} contains spaces, control or non-ASCII "
                              "characters: check for a stray quote, newline or copy-paste artefact")
    if base_url:
        _check_base_url(base_url)
    return ProviderSettings(
        profile=name,
        base_url=base_url.rstrip("/") if base_url else None,
        model=env.get("AGENT_SERVER_MODEL") or data.get("model") or stored.get("model") or profile.model,
        context_window=_context_window(env, data, profile),
        reasoning_content=data.get("reasoning_content") or profile.reasoning_content,
        key_required=key_needed(profile, base_url),
        api_key=api_key,
        api_key_env=key_env,
        api_key_source=source,
        key_store=store,
    )


def _stored_key(signin: Mapping[str, Any], profile: str) -> tuple[str | None, str | None, Literal["keyring"] | None]:
    """``(key, source, key_store)`` of what ``agent-server login`` stored for ``profile``: the key
    itself from the credentials file, or ``(None, "system keyring", "keyring")`` — the keyring is
    not opened here (start-up stays cheap)."""
    from agent_server import credentials

    stored = credentials.entry(signin, profile)
    if stored.get("key_store") == "file" and isinstance(stored.get("api_key"), str) and stored["api_key"]:
        return stored["api_key"], "agent-server login (credentials file)", None
    if stored.get("key_store") == "keyring":
        return None, "agent-server login (system keyring)", "keyring"
    return None, None, None


def key_needed(profile: Profile, base_url: str | None) -> bool:
    """Whether requests of ``profile`` at ``base_url`` need an API key: the profile's
    ``key_required`` when set, else yes unless ``base_url`` is on this machine (``is_local``)."""
    if profile.key_required is not None:
        return profile.key_required
    return not is_local(base_url)


def is_local(url: str | None) -> bool:
    """Whether ``url``'s host is this machine: ``localhost`` (and ``*.localhost``), a loopback
    address (``127.0.0.0/8``, ``::1``). ``None`` (no URL) is not local."""
    host = urlsplit(url).hostname if url else None
    if not host:
        return False
    if host == "localhost" or host.endswith(".localhost"):
        return True
    parts = host.split(".")
    if len(parts) == 4 and all(p.isdigit() for p in parts):  # IPv4 without the ipaddress import
        return parts[0] == "127"
    if ":" not in host:
        return False
    import ipaddress  # IPv6 spellings of ::1

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base URL {redact_url(url)!r} is not an http(s) URL with a host "
                          "(expected e.g. https://api.deepseek.com/v1 or http://127.0.0.1:8000/v1)")


def _context_window(env: Mapping[str, str], data: dict[str, Any], profile: Profile) -> int:
    for value, where in ((env.get("AGENT_SERVER_CONTEXT_WINDOW"), "AGENT_SERVER_CONTEXT_WINDOW"),
                         (data.get("context_window"), "context_window in the config file")):
        if value in (None, ""):
            continue
        try:
            window = int(value)
        except (TypeError, ValueError):
            window = 0
        if window <= 0 or isinstance(value, bool):
            raise ConfigError(f"{where} must be a positive number of tokens, got {value!r}")
        return window
    return profile.context_window


def redact_url(url: str | None) -> str | None:
    """``url`` without credentials: user:password and query values are replaced by ``***``
    (safe to log or show; API keys sometimes travel as ``?api-key=``)."""
    if not url:
        return url
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    query = "&".join(f"{k}=***" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
