-- Unit checks of the plugin's pure parts, run by test_units.py with `nvim --clean -l`:
-- position conversion (emoji, combining marks, CRLF), the proposal model's hunk spans and shifting,
-- the permission text with its diff. Exits 1 on the first failure, printing it.
vim.opt.rtp:prepend(assert(os.getenv("AGENT_SERVER_PLUGIN")))
local text = require("agent_server.text")
local check = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "check.lua"))
local eq = check.eq

-- positions: "a😀é̂b" — 😀 is 4 bytes / 2 UTF-16 units / 1 code point; é̂ is e + U+0301 + U+0302
local line = "a😀e\u{301}\u{302}b"
eq(text.byteindex(line, "utf-16", 1), 1, "utf-16 before the emoji")
eq(text.byteindex(line, "utf-16", 3), 5, "utf-16 after the emoji (2 units)")
eq(text.byteindex(line, "utf-32", 2), 5, "utf-32 after the emoji (1 code point)")
eq(text.byteindex(line, "utf-8", 5), 5, "utf-8 is bytes")
eq(text.byteindex(line, "utf-16", 6), 10, "utf-16 after the combining marks")
eq(text.byteindex(line, "utf-16", 99), #line, "past the end clamps")
eq(text.utfindex(line, "utf-16", 5), 3, "bytes -> utf-16")
eq(text.utfindex(line, "utf-32", 10), 5, "bytes -> utf-32")

-- a text index: LSP positions <-> byte offsets; the line after the final newline is the end
local idx = text.index("ab\n😀x\n")
eq(idx.offset(1, 2, "utf-16"), 7, "offset after the emoji on line 2")
eq(idx.offset(2, 0, "utf-16"), 9, "the end of the text")
eq(idx.offset(7, 3, "utf-16"), 9, "past the last line clamps")
eq(idx.position(7, "utf-16"), { line = 1, character = 2 }, "position from an offset")

-- CRLF: the plugin's text uses \n, the wire puts \r\n back; a file's bytes read as Neovim reads them
eq(text.to_doc("a\r\nb\r\n", "\r\n"), "a\nb\n", "to_doc")
eq(text.to_doc("a\r\nb\r", "\n"), "a\r\nb\r", "to_doc keeps a \\r that is not the line break")
eq(text.wire("a\nb\n", "\r\n"), "a\r\nb\r\n", "wire")
for _, raw in ipairs({ "x\r\ny", "\239\187\191x\r\ny\r\n", "a\r\nb\nc\r\n", "a\rb", "\n\r\n", "", "\239\187\191" }) do
  local d = text.from_raw(raw)
  eq((d.bom and text.BOM or "") .. text.wire(d.text, d.eol), raw, "from_raw round trip of " .. vim.inspect(raw))
end
eq(text.from_raw("\239\187\191x\r\ny\r\n"), { text = "x\ny\n", eol = "\r\n", bom = true, body = "x\r\ny\r\n" }, "BOM + CRLF")
eq(text.from_raw("a\r\nb\nc\r\n").eol, "\n", "mixed line breaks stay text")

-- spans apply bottom up from original offsets
eq(text.apply_spans("0123456789", { { 8, 9, "EIGHT" }, { 1, 2, "one\nmore" } }), "0one\nmore234567EIGHT9", "spans")

-- line edits between two texts (used when the user edited outside the hunks)
local edits = text.line_edits("a\nb\nc\n", "a\nB\nc\nd\n", "utf-16")
eq(#edits, 2, "two line edits")
eq(edits[1].range, { start = { line = 1, character = 0 }, ["end"] = { line = 2, character = 0 } }, "first range")
eq(edits[1].newText, "B\n", "first text")

-- the proposal model: spans of hunks in the proposed text, accepted text with a later hunk shifted
local proposals = require("agent_server.proposals")
local doc = { base = "l1\nl2\nl3\nl4\n", hunks = {
  { a0 = 0, a1 = 3, new = "L1\nextra\n", state = "accepted", text = "L1\nextra\n" },
  { a0 = 9, a1 = 12, new = "L4\n", state = "pending" },
} }
eq(proposals.proposed_text(doc), "L1\nextra\nl2\nl3\nL4\n", "proposed text")
local spans = proposals.proposed_spans(doc)
eq(spans[doc.hunks[2]], { 15, 18 }, "the second hunk's place in the proposed text")
doc.hunks[2].state, doc.hunks[2].text = "accepted", "USER4\n"
eq(proposals.accepted_text(doc), "L1\nextra\nl2\nl3\nUSER4\n", "a later hunk lands at its anchor, shifted")

-- permissions: the question shows the diff of an edit
local lines = require("agent_server.permissions").describe({ title = "Edit a.txt", content = {
  { type = "diff", path = "/w/a.txt", oldText = "one\n", newText = "two\n" } } })
local shown = table.concat(lines, "\n")
eq(shown:find("-one", 1, true) ~= nil and shown:find("+two", 1, true) ~= nil, true, "the diff is shown")

-- a big file's partial diff (the changed region from line 249995): the hunk header has the file's lines
lines = require("agent_server.permissions").describe({ title = "Edit big.txt", content = {
  { type = "diff", path = "/w/big.txt", oldText = "a\nb\nc\n", newText = "a\nB\nc\n",
    _meta = { agentServer = { diff = { partial = true, oldLine = 249995, newLine = 249995 } } } } } })
shown = table.concat(lines, "\n")
eq(shown:match("@@ %-%d+") , "@@ -249995", "the hunk starts at the file's line")
eq(shown:find("+249995", 1, true) ~= nil, true, "on both sides")

check.done("units")
