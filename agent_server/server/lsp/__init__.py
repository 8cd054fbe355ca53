"""The LSP front end: ``agent-server lsp``, a pygls language server over the session host.

``main`` (the command), ``server`` (the language server: initialize, code actions, commands),
``documents`` (reads from synced documents, edits through ``workspace/applyEdit``), ``turns``
(one work-done progress and one markdown transcript per turn), ``questions`` (permissions as
``window/showMessageRequest``). PROTOCOL.md "The LSP surface".

Must never: be imported on the ACP path (pygls is loaded only by ``agent-server lsp``), or hold
session state (the host does).
"""
