"""JSON-RPC 2.0 over NDJSON: the engine (``jsonrpc``), the size bounds of a sent line
(``bounds``), the wire encoding (``wire``) and the reader and writer on stdio (``stdio``).
Imports nothing of ours outside ``server/rpc``.
"""
