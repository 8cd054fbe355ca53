"""JSON-RPC 2.0 over NDJSON: the engine (``jsonrpc``), the size bounds of a sent line
(``bounds``) and the wire encoding (``wire``). Imports nothing of ours outside ``server/rpc``.
"""
