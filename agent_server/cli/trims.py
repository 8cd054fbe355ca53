"""What the ``agent-server`` process keeps its libraries from loading for features it never uses.

Role: ``apply()``, called once by the CLI's ``main`` before anything imports pydantic, turns off
pydantic's plugin discovery in this process: a stand-in for ``pydantic.plugin._loader`` in
``sys.modules`` whose ``get_plugins()`` finds no plugin, as the real one does with
``PYDANTIC_DISABLE_PLUGINS=__all__``. The first model class would otherwise import
``importlib.metadata`` (with ``email``, ``zipfile``, ``csv`` …) and read the entry points of every
installed distribution (its cost: bench/README.md); no plugin is a feature of this server.

Must never: set an environment variable (the shells and tools this server starts inherit its
environment: a user's own pydantic program run from the agent keeps its plugins), or act in a
process that already loaded the real loader (then it does nothing).

Robustness: pydantic asks its loader for ``get_plugins`` only (``plugin/_schema_validator.py``, when
a validator is made); any other name read from the stand-in loads the real module in its place and
answers from it, so a pydantic that moves its internals is at worst as slow as before, never broken
(``tests/server/test_process_trims.py`` pins that the stand-in is still what pydantic consults).
httpx's command-line module is kept out the same way, by ``llm/_transport.py`` (it imports httpx).
"""

from __future__ import annotations

import sys
import types

LOADER = "pydantic.plugin._loader"


def _no_plugins() -> tuple[()]:
    """The stand-in's ``get_plugins``: no pydantic plugin in this process."""
    return ()


def _real_loader_attribute(name: str) -> object:
    """A name the stand-in does not have: load pydantic's own loader in its place, answer from it."""
    if name.startswith("__"):
        raise AttributeError(name)
    import importlib

    if getattr(sys.modules.get(LOADER), "_stand_in", False):
        del sys.modules[LOADER]
    return getattr(importlib.import_module(LOADER), name)


def apply() -> None:
    """Turn off pydantic's plugin discovery for this process (module docstring); idempotent."""
    if LOADER in sys.modules:
        return
    stand_in = types.ModuleType(LOADER, "agent_server.cli.trims: pydantic plugin discovery is off here")
    stand_in.get_plugins = _no_plugins  # type: ignore[attr-defined]
    stand_in.__getattr__ = _real_loader_attribute  # type: ignore[attr-defined]
    stand_in._stand_in = True  # type: ignore[attr-defined]
    sys.modules[LOADER] = stand_in
