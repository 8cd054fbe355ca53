"""``agent-server login`` and ``agent-server logout``: sign in to a model provider from a terminal.

Role: ``login`` asks for the provider (the config's profiles), its base URL when the profile has
none, the API key (not echoed) and the model; checks the key with one small request
(``GET <base URL>/models``, which costs no tokens and lists the models the key may use); says
clearly what went wrong (refused key, unreachable endpoint, unknown model) and stores only what
the user confirms; then records the choice with ``credentials.store`` — the key in the system
keyring when one is usable, else in ``<config folder>/credentials.json`` (``0600``). This is the
ACP ``terminal`` auth method: an editor runs it in a terminal and takes exit status 0 as signed in.
``logout`` removes what ``login`` stored (``--profile NAME``, default the configured profile;
``--all``); a name that is neither a configured profile nor stored is an error naming both lists.

Exit status: 0 stored (or removed); 1 nothing stored (declined, cancelled, a write failed);
2 usage or configuration error.

Must never: echo, print or log the key; store anything the check refused unless the user says so.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from typing import Any, Callable

from agent_server.config import credentials

CHECK_TIMEOUT = 15.0
"""Seconds the check request may take before the endpoint counts as unreachable."""
#: ``--check-config --probe`` (``:checkhealth``): a health check must not hang the editor
PROBE_TIMEOUT = 5.0

_OVERRIDES = ("AGENT_SERVER_API_KEY", "AGENT_SERVER_PROFILE", "AGENT_SERVER_MODEL", "AGENT_SERVER_BASE_URL")


class Cancelled(Exception):
    """The user ended the dialogue (Ctrl-C, Ctrl-D, or declined)."""


def main(argv: list[str], config_path: str | None = None) -> int:
    """``agent-server [--config PATH] login [--config PATH]``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="agent-server login", description=(
        "Sign in to a model provider: pick the provider and model, paste the API key. The key is checked "
        "with one request, then kept in the system keyring (or a file only you can read in the config folder)."))
    parser.add_argument("--config", default=config_path, help="read this TOML config file (its [profiles])")
    args = parser.parse_args(argv)
    from agent_server.config.load import ConfigError, load_config

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        sys.stderr.write(f"agent-server login: {exc}{_profile_env_note()}\n")
        return 2
    try:
        return Login(config, ask=_ask, ask_secret=_ask_secret, say=_say).run()
    except (Cancelled, KeyboardInterrupt, EOFError):
        _say("\nCancelled: nothing was stored.")
        return 1
    except credentials.CredentialsError as exc:
        _say(f"agent-server login: {exc}")
        return 1


def logout_main(argv: list[str], config_path: str | None = None) -> int:
    """``agent-server logout [--profile NAME | --all]``; returns the exit status."""
    parser = argparse.ArgumentParser(prog="agent-server logout",
                                     description="Remove the API key `agent-server login` stored.")
    parser.add_argument("--config", default=config_path, help="read this TOML config file")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--profile", help="the profile to sign out of (default: the configured one)")
    which.add_argument("--all", action="store_true", help="every stored sign-in")
    args = parser.parse_args(argv)
    from agent_server.config.load import ConfigError, load_config

    try:
        config, config_error = load_config(args.config), None
    except ConfigError as exc:
        config, config_error = None, f"{exc}{_profile_env_note()}"
    try:
        stored = sorted((credentials.read().get("profiles") or {}))
    except credentials.CredentialsError:
        stored = []
    profile = args.profile or (None if args.all or config is not None else os.environ.get("AGENT_SERVER_PROFILE"))
    if profile is not None and profile not in stored:  # nothing to remove: is the name right at all?
        if config is None:
            sys.stderr.write(f"agent-server logout: no stored sign-in for {profile!r} (stored: "
                             f"{', '.join(stored) or 'none'}), and the config cannot be read to check the name: "
                             f"{config_error}\n")
            return 2
        if profile not in config.profiles:
            sys.stderr.write(f"agent-server logout: there is no profile {profile!r}. Known profiles: "
                             f"{', '.join(sorted(config.profiles))}; stored sign-ins: {', '.join(stored) or 'none'}.\n")
            return 2
    if profile is None and not args.all:
        if config is not None:
            profile = config.provider.profile
        else:  # a broken config: fall back to the profile login chose last
            try:
                profile = credentials.read().get("profile")
            except credentials.CredentialsError:
                profile = None
            if profile is None:
                sys.stderr.write(f"agent-server logout: cannot tell the profile, as the config cannot be read "
                                 f"({config_error}): use --profile NAME or --all\n")
                return 2
    try:
        removed = credentials.forget(None if args.all else profile)
    except credentials.CredentialsError as exc:
        sys.stderr.write(f"agent-server logout: {exc}\n")
        return 1
    if removed:
        _say(f"Signed out of {', '.join(removed)}: the stored key is removed.")
    else:
        _say(f"No stored sign-in for {profile or 'any profile'}: nothing to remove.")
    for name in _OVERRIDES:
        if os.environ.get(name) and name.endswith("API_KEY"):
            _say(f"note: {name} is set in this environment; that key is still used.")
    return 0


def _profile_env_note() -> str:
    """A note naming ``AGENT_SERVER_PROFILE`` when it is set (it picks the profile over the config)."""
    value = os.environ.get("AGENT_SERVER_PROFILE")
    return f" (AGENT_SERVER_PROFILE={value!r} is set in this environment)" if value else ""


class Login:
    """The login dialogue over ``ask(prompt) -> str``, ``ask_secret(prompt) -> str`` and
    ``say(text)`` (a terminal by default); ``check`` makes the one request (``check_key``)."""

    def __init__(self, config: Any, *, ask: Callable[[str], str], ask_secret: Callable[[str], str],
                 say: Callable[[str], None], check: Callable[..., "CheckResult"] | None = None) -> None:
        self.config, self.ask, self.ask_secret, self.say = config, ask, ask_secret, say
        self.check = check or check_key

    def run(self) -> int:
        """Ask, check, store; the exit status."""
        from agent_server.config.load import key_needed
        from agent_server.config.resolve import signin_entry

        self.say("agent-server login: sign in to a model provider.")
        name = self._provider()
        profile = self.config.profiles[name]
        try:
            stored = signin_entry(credentials.read(), name)
        except credentials.CredentialsError:
            stored = {}  # replaced by what this login stores
        base_url = profile.base_url or stored.get("base_url")
        asked_url = None
        if not profile.base_url:
            base_url = asked_url = self._base_url(base_url)
        needs_key = key_needed(profile, base_url)
        key = self._key(name, needs_key)
        result = self.check(base_url, key)
        if not result.ok:
            self.say(result.message)
            if not self._yes("Store it anyway?"):
                raise Cancelled
        else:
            self.say(result.message)
        model = self._model(stored.get("model") or profile.model, result.models)
        if result.ok and result.models and model not in result.models:
            self.say(f"The endpoint does not list the model {model!r} (it offers: {_few(result.models)}).")
            if not self._yes("Use it anyway?"):
                raise Cancelled
        kind, where = credentials.store(name, key or None, model=model, base_url=asked_url)
        self.say(f"Signed in: profile {name}, model {model}.")
        self.say(f"The key is stored in {where}." if kind else "No key stored (none given).")
        for variable in _OVERRIDES:
            if os.environ.get(variable):
                self.say(f"note: {variable} is set in this environment and takes precedence over what was stored.")
        return 0

    def _provider(self) -> str:
        names = list(self.config.profiles)
        default = self.config.provider.profile
        self.say("Providers:")
        for i, name in enumerate(names, 1):
            p = self.config.profiles[name]
            where = p.base_url or "(your base URL)"
            self.say(f"  {i:2}. {name:12} {where}")
        while True:
            answer = self.ask(f"Provider [{default}]: ").strip() or default
            if answer.isdigit() and 1 <= int(answer) <= len(names):
                return names[int(answer) - 1]
            if answer in names:
                return answer
            self.say(f"  not a provider: type a number from 1 to {len(names)} or a name from the list")

    def _base_url(self, default: str | None) -> str:
        from urllib.parse import urlsplit

        while True:
            answer = self.ask(f"Base URL (OpenAI-compatible, e.g. http://127.0.0.1:8000/v1)"
                              f"{f' [{default}]' if default else ''}: ").strip() or (default or "")
            parts = urlsplit(answer)
            if parts.scheme in ("http", "https") and parts.hostname:
                if parts.path.strip("/") == "":
                    self.say(f"  note: no path after the host; OpenAI-compatible base URLs usually end in /v1 "
                             f"(e.g. {answer.rstrip('/')}/v1)")
                return answer.rstrip("/")
            self.say("  not an http(s) URL with a host")

    def _key(self, name: str, needed: bool) -> str:
        hint = "typing is hidden" if needed else "not needed for this endpoint: Enter to skip"
        for _ in range(3):
            key = self.ask_secret(f"API key for {name} ({hint}): ").strip()
            if key and (not key.isascii() or not key.isprintable() or " " in key):
                self.say("  that key has spaces, control or non-ASCII characters: paste it again")
                continue
            if key or not needed:
                return key
            self.say(f"  {name} needs a key")
        raise Cancelled

    def _model(self, default: str | None, offered: list[str]) -> str:
        if offered:
            self.say(f"The endpoint offers: {_few(offered)}")
        default = default or (offered[0] if offered else None)
        while True:
            answer = self.ask(f"Model{f' [{default}]' if default else ''}: ").strip() or (default or "")
            if answer:
                return answer
            self.say("  a model id is needed")

    def _yes(self, question: str) -> bool:
        return self.ask(f"{question} [y/N]: ").strip().lower() in ("y", "yes")


class CheckResult:
    """The check's outcome: ``ok``, a ``message`` for the user, ``models`` the endpoint lists."""

    def __init__(self, ok: bool, message: str, models: list[str] | None = None) -> None:
        self.ok, self.message, self.models = ok, message, models or []


def check_key(base_url: str | None, key: str | None, *, timeout: float = CHECK_TIMEOUT) -> CheckResult:
    """``GET <base_url>/models`` with ``Authorization: Bearer <key>`` (no header without a key):
    200 → ok with the listed model ids; 401/403 → the key is refused; other statuses, timeouts
    and connection errors → not ok, with the reason. The key never appears in the message."""
    import httpx

    from agent_server.config.load import redact_url

    if not base_url:
        return CheckResult(False, "No base URL: the key cannot be checked.")
    url = base_url.rstrip("/") + "/models"
    shown = redact_url(url)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(url, headers=headers, timeout=timeout, follow_redirects=False)
    except httpx.TimeoutException:
        return CheckResult(False, f"Could not check the key: {shown} did not answer within {timeout:.0f} s.")
    except httpx.HTTPError as exc:
        reason = str(exc).replace(key, "<key>") if key else str(exc)
        return CheckResult(False, f"Could not check the key: cannot reach {shown} ({reason or type(exc).__name__}).")
    detail = _error_text(response, key)
    if response.status_code in (401, 403):
        return CheckResult(False, f"The endpoint refused this key (HTTP {response.status_code}{detail}).")
    if response.status_code == 404 and not any(part[:1] == "v" and part[1:2].isdigit()
                                               for part in httpx.URL(url).path.split("/")):
        # the commonest set-up mistake: the API root without its /v1 (the chat requests would 404 too)
        return CheckResult(False, f"Could not check the key: {shown} answered HTTP 404{detail} — is the base URL "
                                  f"missing its API root? OpenAI-compatible servers answer at …/v1: try "
                                  f"{redact_url(base_url.rstrip('/'))}/v1.")
    if response.status_code != 200:
        return CheckResult(False, f"Could not check the key: {shown} answered HTTP {response.status_code}{detail}.")
    try:
        models = [str(m["id"]) for m in response.json().get("data", []) if isinstance(m, dict) and "id" in m]
    except (ValueError, AttributeError, TypeError):
        models = []
    if not key:
        return CheckResult(True, f"The endpoint answered without a key ({shown}: HTTP 200).", models)
    return CheckResult(True, f"The endpoint accepted the key ({shown}: HTTP 200).", models)


def _error_text(response: Any, key: str | None) -> str:
    try:
        error = response.json().get("error")
        text = error.get("message") if isinstance(error, dict) else error
    except (ValueError, AttributeError):
        text = None
    if not isinstance(text, str) or not text.strip():
        return ""
    text = " ".join(text.split())[:200]
    return ": " + (text.replace(key, "<key>") if key else text)


def _few(names: list[str], limit: int = 8) -> str:
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _ask(prompt: str) -> str:
    sys.stdout.write(prompt)
    sys.stdout.flush()
    line = sys.stdin.readline()
    if not line:
        raise EOFError
    return line.rstrip("\n")


def _ask_secret(prompt: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(prompt)
    return _ask(prompt)  # piped input (scripts): nothing to hide from


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
