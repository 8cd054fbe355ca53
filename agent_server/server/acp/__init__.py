"""The ACP front end: the handlers (``server``), their models, permission requests, the editor's
files, ``initialize``, the fast ``session/new`` and the stdio serve loop (``stdio``).

Must never: be imported by the LSP front end (``server/lsp``); ``server/edits.py`` is what both share.
"""
