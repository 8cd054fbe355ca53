"""Fixtures of the Neovim plugin's tests (``support/nvim.py``): a real Neovim from PyPI with the
plugin on its runtimepath, the real agent-server, the offline endpoint."""

from support.nvim import endpoint, make_editor, server_env  # noqa: F401
