"""Sign-in state of the session host: is there a usable key for the configured model?

Role: ``ensure_key`` is what ``session/new|load|resume|fork`` and ``authenticate`` ask. When the
default provider cannot be used — no endpoint, no model, or it needs a key
(``ProviderSettings.key_required``) and has none — it looks again —
the config is read anew (``agent-server login`` may have run in a terminal since start-up) and a
key ``login`` put in the system keyring is fetched — and, if it still cannot, raises
``HostError("auth_required")``, which ACP answers ``-32000`` so the editor offers the sign-in.
``sign_out`` removes what ``login`` stored for the current profile.

Cost: when the key came from the environment or the config file, or the profile needs none,
``ensure_key`` is two attribute reads — no file, no ``keyring`` import (``session/new`` must stay
fast). Only a missing key pays for a re-read (in a worker thread).

Must never: log or show a key, or raise for a profile that needs no key.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable

from agent_server.config import credentials
from agent_server.config.load import Config, ConfigError, ProviderSettings
from agent_server.config.resolve import missing_key, unusable  # noqa: F401 (shared with the CLI's fast path)
from agent_server.host.errors import HostError

log = logging.getLogger("agent_server.server")

ConfigLoader = Callable[[], Config]
"""Reads the configuration again (same file, same environment) — the front end's."""


async def ensure_key(host: Any, client_runs_login: bool = False) -> None:
    """Make sure the default provider of ``host`` (a ``SessionHost``) has a usable key, updating
    ``host.config`` when one is found; ``HostError("auth_required")`` when none is.

    A config that failed to load is not checked here (its error is reported on the prompt)."""
    if host.config_error or not unusable(host.config.provider):
        return
    try:
        host.config = await asyncio.to_thread(refresh, host.config, host.config_loader)
    except credentials.KeyringTimeout as exc:  # a clear error now, not a session/new left unanswered
        raise HostError("internal", str(exc), {"code": "KEYRING", "retryable": True}) from None
    provider = host.config.provider
    if unusable(provider):
        raise HostError("auth_required", auth_message(provider, client_runs_login),
                        {"profile": provider.profile, "keyVariable": provider.api_key_env})


def refresh(config: Config, loader: ConfigLoader | None) -> Config:
    """``config`` read again through ``loader`` (kept as is when that fails), with the key of its
    default profile fetched from the keyring when ``login`` stored it there. Blocking."""
    fresh = config
    if loader is not None:
        try:
            fresh = loader()
        except ConfigError as exc:
            log.warning("sign-in check: the configuration cannot be read again: %s", exc)
    return fetch_keyring_key(fresh, fresh.provider.profile)


def fetch_keyring_key(config: Config, profile: str) -> Config:
    """``config`` with ``profile``'s key taken from the system keyring for every provider of that
    profile waiting for it (``key_store == "keyring"``); unchanged when the keyring has none.
    Blocking (imports ``keyring``, may talk to the Secret Service)."""
    waiting = [p for p in _providers(config) if p.profile == profile and p.key_store == "keyring" and not p.api_key]
    if not waiting:
        return config
    key = credentials.keyring_get(profile)
    if not key:
        return config
    return with_key(config, profile, key)


def with_key(config: Config, profile: str, key: str) -> Config:
    """``config`` whose providers of ``profile`` that wait for a keyring key carry ``key``."""
    def fill(p: ProviderSettings) -> ProviderSettings:
        if p.profile == profile and p.key_store == "keyring" and not p.api_key:
            return p.model_copy(update={"api_key": key})
        return p

    models = tuple(c.model_copy(update={"provider": fill(c.provider)}) for c in config.models)
    return config.model_copy(update={"provider": fill(config.provider), "models": models})


def auth_message(provider: ProviderSettings, client_runs_login: bool = False) -> str:
    """Why a session cannot start, and the two ways out (sign in, or set the variable); the
    editor's sign-in is named only for a client that runs it (``client_runs_login``)."""
    if not provider.base_url:
        what, variable = (f"no model endpoint configured (profile {provider.profile!r} has no base URL)",
                          "AGENT_SERVER_BASE_URL")
    elif not provider.model:
        what, variable = f"no model configured for profile {provider.profile!r}", "AGENT_SERVER_MODEL"
    else:
        what = f"profile {provider.profile!r} needs an API key and none is configured"
        variable = provider.api_key_env or "AGENT_SERVER_API_KEY"
    how = ("the editor's sign-in runs it" if client_runs_login
           else "run it in a terminal, then sign in again or start a new session")
    return f"Authentication required: {what}. Sign in with `agent-server login` ({how}), or set {variable}."


async def sign_out(host: Any) -> list[str]:
    """Remove what ``agent-server login`` stored for the default profile (keyring entry and
    record) and read the config again; returns the profiles removed. A key from the environment
    or the config file stays (it is not ours to remove)."""
    profile = host.config.provider.profile
    removed = await asyncio.to_thread(credentials.forget, profile)
    if host.config_loader is not None:
        try:
            host.config = await asyncio.to_thread(host.config_loader)
        except ConfigError as exc:
            log.warning("logout: the configuration cannot be read again: %s", exc)
    return removed


def _providers(config: Config) -> list[ProviderSettings]:
    return [config.provider, *(c.provider for c in config.models)]
