"""Configuration: ``load`` (the TOML file and the environment, validated), ``resolve`` (the
standard-library resolution the fast path shares), ``credentials`` (stored API keys) and
``views`` (the session views the fast path and the host both answer with).

Imports nothing eagerly: the fast path imports ``config.resolve`` and ``config.views`` without
loading pydantic. ``load_config`` and ``ConfigError`` are offered here lazily (PEP 562) for code
that imports them from the package.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ConfigError", "load_config"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from agent_server.config import load

        return getattr(load, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
