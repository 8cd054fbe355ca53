"""Where requests go, from the environment and the config file's data: standard library only.

Role: the provider resolution of ``config.load_config`` without pydantic, shared by it and by the
CLI's pre-asyncio ``session/new`` fast path (``server/acp/fast_session.py``), which must answer exactly
what the full server would: the built-in profiles (``BUILTIN_PROFILES``, plain data),
``resolve_provider`` (→ the ``ProviderSettings`` fields as a dict), ``key_needed``/``is_local``,
``missing_key``/``unusable`` (the sign-in rule of ``session/new``), ``policy_env``, which config
file is read (``config_text``), ``redact_url`` and ``ConfigError``. ``config.load`` wraps these in its validated models
and re-exports the names.

Must never: import anything of ours but ``credentials`` (standard library only), or log a key.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, Literal, Mapping
from urllib.parse import parse_qsl, urlsplit, urlunsplit


class ConfigError(Exception):
    """The config file cannot be read or has invalid keys (message names file and key)."""


def _profile(base_url: str | None = None, api_key_env: str | None = None, model: str | None = None,
             context_window: int = 32_768, reasoning_content: str = "drop",
             key_required: bool | None = None) -> dict[str, Any]:
    return {"base_url": base_url, "api_key_env": api_key_env, "model": model, "context_window": context_window,
            "reasoning_content": reasoning_content, "key_required": key_required}


BUILTIN_PROFILES: dict[str, dict[str, Any]] = {
    "deepseek": _profile("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "deepseek-chat", 128_000, "echo"),
    "openai": _profile("https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4o", 128_000),
    "glm": _profile("https://open.bigmodel.cn/api/paas/v4", "ZHIPUAI_API_KEY", "glm-4.6", 200_000, "echo"),
    "hunyuan": _profile("https://api.hunyuan.cloud.tencent.com/v1", "HUNYUAN_API_KEY", "hunyuan-turbos-latest",
                        32_000),
    "openrouter": _profile("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY", "deepseek/deepseek-chat", 128_000),
    "ollama": _profile("http://127.0.0.1:11434/v1", None, "qwen2.5-coder", 32_768, key_required=False),
    "vllm": _profile("http://127.0.0.1:8000/v1", "VLLM_API_KEY", None, 32_768, key_required=False),
    "llama.cpp": _profile("http://127.0.0.1:8080/v1", None, "local", 32_768, key_required=False),
    "custom": _profile(api_key_env="OPENAI_API_KEY", key_required=False),
}
"""Built-in profiles, every ``config.Profile`` field given. ``custom`` is any OpenAI-compatible
endpoint given by ``base_url``."""


def vision_configured(config_path: str | Path | None, env: Mapping[str, str]) -> bool:
    """Whether the config file gives a model ``vision = true`` (at its top, for the default model,
    or on a ``[[models]]`` entry): ``Config.accepts_images`` from the file alone, for the fast
    ``initialize``. A file without the word is not parsed; one that cannot be read or parsed: ``False``."""
    if config_path is None and not env.get("AGENT_SERVER_CONFIG") and sys.platform.startswith("linux"):
        # platformdirs' folder on Linux, without importing it (8 ms) before the initialize answer
        home = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        config_path = Path(home) / "agent-server" / "config.toml"
        if not config_path.is_file():
            return False
    try:
        _, text = config_text(config_path, env)
    except (ConfigError, OSError):
        return False
    if not text or "vision" not in text:
        return False
    import tomllib

    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, ValueError):
        return False
    models = data.get("models")
    return data.get("vision") is True or (isinstance(models, list) and any(
        isinstance(m, dict) and m.get("vision") is True for m in models))


def default_config_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/agent-server/config.toml``, else platformdirs' user config folder."""
    env = os.environ if env is None else env
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "agent-server" / "config.toml"
    import platformdirs

    return Path(platformdirs.user_config_dir("agent-server")) / "config.toml"


def config_text(path: str | Path | None, env: Mapping[str, str]) -> tuple[Path, str | None]:
    """The config file to read — ``path``, else ``$AGENT_SERVER_CONFIG``, else the default — and
    its text; ``None`` when the default file does not exist (a file asked for must exist).
    ``ConfigError`` when it cannot be read."""
    explicit = path is not None or bool(env.get("AGENT_SERVER_CONFIG"))
    path = Path(path or env.get("AGENT_SERVER_CONFIG") or default_config_path(env))
    if not (explicit or path.exists()):
        return path, None
    try:
        return path, path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc}") from None


def missing_key(provider: Any) -> bool:
    """Whether ``provider`` (``ProviderSettings``, or anything with its fields) needs a key and
    has none in memory."""
    return provider.key_required and not provider.api_key


def unusable(provider: Any) -> bool:
    """Whether sessions cannot use ``provider`` before a sign-in: no endpoint, no model, or a
    missing key (what ``agent-server login`` sets)."""
    return not provider.base_url or not provider.model or missing_key(provider)


def policy_env(env: Mapping[str, str]) -> dict[str, Any]:
    """``[policy]`` values from ``AGENT_SERVER_SANDBOX``, ``AGENT_SERVER_APPROVAL_TIMEOUT``,
    ``AGENT_SERVER_NETWORK``, ``AGENT_SERVER_READ_ALLOWED`` (paths joined by ``os.pathsep``; validated by
    ``PolicySettings``)."""
    out: dict[str, Any] = {}
    if env.get("AGENT_SERVER_SANDBOX"):
        out["sandbox"] = env["AGENT_SERVER_SANDBOX"].strip().lower()
    if env.get("AGENT_SERVER_APPROVAL_TIMEOUT"):
        out["approval_timeout"] = env["AGENT_SERVER_APPROVAL_TIMEOUT"].strip()
    if env.get("AGENT_SERVER_NETWORK"):
        value = env["AGENT_SERVER_NETWORK"].strip().lower()
        out["network"] = "ask" if value == "ask" else value in ("1", "true", "yes", "on")
    if env.get("AGENT_SERVER_READ_ALLOWED"):
        out["read_allowed"] = [p for p in env["AGENT_SERVER_READ_ALLOWED"].split(os.pathsep) if p.strip()]
    return out


def resolve_provider(data: Mapping[str, Any], profiles: Mapping[str, Any], env: Mapping[str, str],
                     signin: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of the session's ``ProviderSettings`` from the config file's ``data``, the
    ``profiles`` (name → an object with the ``config.Profile`` fields), the environment and the
    stored sign-ins (``credentials.read``). Raises ``ConfigError`` (unknown profile, a key with
    spaces or control characters, a base URL that is not http(s))."""
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
    stored = signin_entry(signin, name)
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
        api_key, source, store = stored_key(signin, name)
    if api_key is not None:
        api_key = api_key.strip()
        if not api_key.isascii() or not api_key.isprintable() or " " in api_key:
            raise ConfigError(f"the API key from {source} contains spaces, control or non-ASCII "
                              "characters: check for a stray quote, newline or copy-paste artefact")
    if base_url:
        check_base_url(base_url)
    return dict(
        profile=name,
        base_url=base_url.rstrip("/") if base_url else None,
        model=env.get("AGENT_SERVER_MODEL") or data.get("model") or stored.get("model") or profile.model,
        context_window=context_window(env, data, profile),
        reasoning_content=data.get("reasoning_content") or profile.reasoning_content,
        key_required=key_needed(profile, base_url),
        api_key=api_key,
        api_key_env=key_env,
        api_key_source=source,
        key_store=store,
    )


def signin_entry(data: Mapping[str, Any], profile: str) -> dict[str, Any]:
    """The stored sign-in of ``profile`` in ``data`` (``credentials.read``), or ``{}``."""
    found = (data.get("profiles") or {}).get(profile)
    return found if isinstance(found, dict) else {}


def stored_key(signin: Mapping[str, Any], profile: str) -> tuple[str | None, str | None, Literal["keyring"] | None]:
    """``(key, source, key_store)`` of what ``agent-server login`` stored for ``profile``: the key
    itself from the credentials file, or ``(None, "system keyring", "keyring")`` — the keyring is
    not opened here (start-up stays cheap)."""
    stored = signin_entry(signin, profile)
    if stored.get("key_store") == "file" and isinstance(stored.get("api_key"), str) and stored["api_key"]:
        return stored["api_key"], "agent-server login (credentials file)", None
    if stored.get("key_store") == "keyring":
        return None, "agent-server login (system keyring)", "keyring"
    return None, None, None


def key_needed(profile: Any, base_url: str | None) -> bool:
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


def check_base_url(url: str) -> None:
    """``ConfigError`` unless ``url`` is an http(s) URL with a host."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"base URL {redact_url(url)!r} is not an http(s) URL with a host "
                          "(expected e.g. https://api.deepseek.com/v1 or http://127.0.0.1:8000/v1)")


def context_window(env: Mapping[str, str], data: Mapping[str, Any], profile: Any) -> int:
    """Tokens of the model's window: ``AGENT_SERVER_CONTEXT_WINDOW``, the file's ``context_window``,
    else the profile's. ``ConfigError`` for a value that is not a positive whole number."""
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
