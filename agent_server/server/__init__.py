"""The front ends: ``rpc`` (the NDJSON JSON-RPC engine), ``acp`` (the ACP handlers and the stdio
wiring), ``lsp`` (the language server), and ``edits`` (workspace edits, shared by both).

Must never: hold conversation state outside the session log.
"""
