"""The ACP front end: the handlers (``server``), their models, permission requests, the editor's
files, ``initialize`` and the fast ``session/new`` (``cli/serve.py`` serves it on stdio).

Must never: be imported by the LSP front end (``server/lsp``); ``server/edits.py`` is what both share.
"""
