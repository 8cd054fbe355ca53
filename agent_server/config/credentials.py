"""Stored sign-ins: what ``agent-server login`` chose, and where the key it was given lives.

Role: read and write ``<config folder>/credentials.json`` (mode ``0600``, folder ``0700``) — per
profile the chosen model (and base URL for profiles without one), and either the key itself
(``"key_store": "file"``) or a note that it is in the system keyring (``"key_store": "keyring"``,
service ``agent-server``, user name = the profile). The file also names the profile picked last.

Must never: print or log a key; leave a key in a file another user can read (the file is written
``0600`` through a temporary file and renamed); keep a partly written file.

Shape (version 1)::

    {"version": 1, "profile": "deepseek",
     "profiles": {"deepseek": {"model": "deepseek-chat", "key_store": "keyring"},
                  "mybox": {"model": "qwen", "base_url": "http://10.0.0.5:8000/v1",
                            "key_store": "file", "api_key": "sk-…"}}}

Reading the file is cheap (one small JSON file, standard library only); the ``keyring`` package
is imported only by ``keyring_get``/``store``/``forget``, i.e. when a key really is in the keyring
or when signing in or out — never on the path of a key that comes from the environment or the
config file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, Mapping

from agent_server.config.resolve import default_config_path, signin_entry

KEYRING_SERVICE = "agent-server"
"""The keyring service name under which each profile's key is stored (user name = profile)."""

FILE_NAME = "credentials.json"

KeyStore = Literal["file", "keyring"]


class CredentialsError(Exception):
    """The credentials file cannot be read, is not ours, or cannot be written (message names it)."""


def credentials_path(env: Mapping[str, str] | None = None) -> Path:
    """``<config folder>/credentials.json``: the folder of the default config file
    (``$XDG_CONFIG_HOME/agent-server``, else the platform's user config folder)."""
    return default_config_path(env).parent / FILE_NAME


def read(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The stored sign-ins (the shape in the module docstring); ``{}`` when there is none.

    Raises ``CredentialsError`` for a file that is not valid JSON of that shape.
    """
    path = credentials_path(env)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise CredentialsError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CredentialsError(f"{path} is not valid JSON ({exc}); run `agent-server logout --all` "
                               "to remove it, then `agent-server login`") from None
    if not isinstance(data, dict) or data.get("version") != 1 or not isinstance(data.get("profiles", {}), dict):
        raise CredentialsError(f"{path} is not an agent-server credentials file (version 1)")
    return data


KEYRING_TIMEOUT = 3.0
"""Seconds a read of the system keyring may take (env ``AGENT_SERVER_KEYRING_TIMEOUT``): a keyring
that blocks (a Secret Service waiting for an unlock dialog nobody sees) must not hang a session."""


class KeyringTimeout(Exception):
    """The system keyring did not answer in time; the message names it."""


def keyring_timeout(env: Mapping[str, str] | None = None) -> float:
    env = os.environ if env is None else env
    try:
        value = float(env.get("AGENT_SERVER_KEYRING_TIMEOUT", "") or KEYRING_TIMEOUT)
    except ValueError:
        return KEYRING_TIMEOUT
    return value if value > 0 else KEYRING_TIMEOUT


def keyring_get(profile: str, timeout: float | None = None) -> str | None:
    """The key of ``profile`` from the system keyring, or ``None`` (no keyring, no such entry, or
    the keyring failed — a locked or absent keyring is not an error here). Imports ``keyring``.
    Raises ``KeyringTimeout`` when the keyring does not answer within ``timeout`` seconds (default
    ``keyring_timeout()``); the read is left to finish in a daemon thread of its own."""
    import threading

    found: dict[str, Any] = {}

    def read() -> None:
        try:
            import keyring

            backend = keyring.get_keyring()
            found["backend"] = f"{type(backend).__module__}.{type(backend).__name__}"
            found["value"] = keyring.get_password(KEYRING_SERVICE, profile)
        except Exception:  # ImportError, keyring.errors.*, D-Bus errors: no usable keyring
            found["value"] = None

    limit = keyring_timeout() if timeout is None else timeout
    reader = threading.Thread(target=read, name="agent-server-keyring", daemon=True)
    reader.start()
    reader.join(limit)
    if reader.is_alive():
        backend = found.get("backend") or os.environ.get("PYTHON_KEYRING_BACKEND") or "the default back-end"
        raise KeyringTimeout(f"the system keyring ({backend}) did not answer within {limit:g} s when asked for the "
                             f"key of profile {profile!r} (locked, or waiting for an unlock prompt?); unlock it, or "
                             "set the key in the environment, and try again")
    return found.get("value") or None


def store(profile: str, api_key: str | None, *, model: str | None, base_url: str | None = None,
          env: Mapping[str, str] | None = None, use_keyring: bool = True) -> tuple[KeyStore | None, str]:
    """Record the sign-in of ``profile`` (and make it the profile picked by default).

    The key goes to the system keyring when one is usable (checked by writing and reading it
    back), else into the credentials file. ``api_key`` ``None``/empty stores no key (a profile
    that needs none). Returns ``(key_store, where)``: ``"keyring"``/``"file"``/``None`` and a
    human description of the place. Raises ``CredentialsError`` when the file cannot be written.
    """
    data = _read_for_update(env)
    record: dict[str, Any] = {}
    if model:
        record["model"] = model
    if base_url:
        record["base_url"] = base_url
    where = "nowhere (no key)"
    kind: KeyStore | None = None
    if api_key:
        backend = _keyring_store(profile, api_key) if use_keyring else None
        if backend is not None:
            kind, where = "keyring", f"the system keyring ({backend})"
            record["key_store"] = "keyring"
        else:
            if use_keyring:
                _keyring_delete(profile)  # an older key must not shadow the new one
            kind, where = "file", f"{credentials_path(env)} (readable by you only)"
            record.update(key_store="file", api_key=api_key)
    data.setdefault("profiles", {})[profile] = record
    data["profile"] = profile
    _write(data, env)
    return kind, where


def forget(profile: str | None, env: Mapping[str, str] | None = None) -> list[str]:
    """Remove the stored sign-in of ``profile`` (``None``: every profile): its keyring entry and
    its record (the file is deleted when nothing is left). Returns the profiles removed."""
    data = _read_for_update(env)
    profiles = data.get("profiles") or {}
    names = list(profiles) if profile is None else [profile]
    removed: list[str] = []
    for name in names:
        had_keyring = _keyring_delete(name) if (profile is not None or signin_entry(data, name).get("key_store") == "keyring") else False
        if profiles.pop(name, None) is not None or had_keyring:
            removed.append(name)
    if data.get("profile") in removed:
        data.pop("profile")
    path = credentials_path(env)
    if profiles or data.get("profile"):
        _write(data, env)
    elif path.exists():
        path.unlink()
    return removed


def _read_for_update(env: Mapping[str, str] | None) -> dict[str, Any]:
    try:
        data = read(env)
    except CredentialsError:
        data = {}  # a broken file is replaced (login) or removed (logout), never half-used
    data["version"] = 1
    return data


def _write(data: dict[str, Any], env: Mapping[str, str] | None) -> None:
    path = credentials_path(env)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fd = -1
                json.dump(data, fh, indent=2, sort_keys=True)
                fh.write("\n")
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            if fd >= 0:
                os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp"))
        except OSError:
            pass
        raise CredentialsError(f"cannot write {path}: {exc.strerror or exc}") from None


def _keyring_store(profile: str, api_key: str) -> str | None:
    """Store in the keyring and read it back; the backend's name, or ``None`` when no keyring is
    usable (not installed, the ``fail`` backend, a fallback of priority < 1 nobody chose with
    ``PYTHON_KEYRING_BACKEND``, a locked or absent Secret Service …)."""
    try:
        import keyring

        backend = keyring.get_keyring()
        # a fallback back-end (keyrings.alt's plain files, priority < 1) is no better than our 0600
        # file: only a real system keyring, or one the user chose explicitly, is used
        if getattr(backend, "priority", 0) < 1 and not os.environ.get("PYTHON_KEYRING_BACKEND"):
            return None
        keyring.set_password(KEYRING_SERVICE, profile, api_key)
        if keyring.get_password(KEYRING_SERVICE, profile) != api_key:
            return None
    except Exception:
        return None
    return type(backend).__module__ + "." + type(backend).__name__


def _keyring_delete(profile: str) -> bool:
    """Delete ``profile``'s keyring entry; whether one was there."""
    try:
        import keyring

        if keyring.get_password(KEYRING_SERVICE, profile) is None:
            return False
        keyring.delete_password(KEYRING_SERVICE, profile)
        return True
    except Exception:
        return False
