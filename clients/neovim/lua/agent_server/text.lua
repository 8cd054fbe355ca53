--- Text of documents as the protocol sees it, positions, hashes, and minimal buffer updates.
---
--- Role: one definition of "the text of a document" (docs/protocol.md "The text of a document"),
--- used for `fs/read_text_file`, hashes and proposals alike, so a hash the server computed on what
--- we sent matches ours: a buffer's lines joined by its 'fileformat' line break, plus a final one
--- when 'eol' is set (an empty buffer is ""); the BOM is the file's property ('bomb'), never text.
--- A file that is not loaded reads the same way from its bytes (`from_raw`: the BOM cut off, CRLF
--- when every line ends with it, as Neovim's own 'fileformats' detection does). Inside the plugin,
--- texts use "\n" (`to_doc`); `wire()` puts the document's own line break back.
--- Positions: LSP `{line, character}` in the negotiated encoding ↔ byte offsets, through
--- `vim.str_byteindex` / `vim.str_utfindex` (never by arithmetic on the column).
---
--- Must never: change a buffer line that did not change (marks, folds and undo stay intact), put a
--- BOM into text, or change 'fixeol' (reading changes no option of a buffer).
local M = {}

local has_011 = vim.fn.has("nvim-0.11") == 1
--- `vim.text.diff` (0.12) or `vim.diff` (0.10, 0.11).
M.diff = (vim.text and vim.text.diff) or vim.diff

local EOLS = { unix = "\n", dos = "\r\n", mac = "\r" }

M.BOM = "\239\187\191"

--- Whether a buffer holding one empty line is empty (no line at all: Neovim writes 0 bytes).
local function is_empty(buf)
  return vim.api.nvim_buf_call(buf, function()
    return vim.fn.line2byte(vim.fn.line("$") + 1) == -1
  end)
end

--- The document of a loaded buffer.
---@param buf integer
---@return { text: string, eol: string, lines: string[], bom: boolean } text uses "\n"; eol is the
---file's line break; bom: 'bomb' (written before the text, never part of it)
function M.buffer_doc(buf)
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local text
  if #lines == 1 and lines[1] == "" and (not vim.bo[buf].eol or is_empty(buf)) then
    text = ""
  else
    text = table.concat(lines, "\n") .. (vim.bo[buf].eol and "\n" or "")
  end
  return { text = text, eol = EOLS[vim.bo[buf].fileformat] or "\n", lines = lines, bom = vim.bo[buf].bomb }
end

--- The bytes a clean buffer was read from, or would be written as: its text with the file's line
--- breaks and BOM; `fixed`: as `:w` writes it ('fixeol' adds the final line break 'eol' lacks).
function M.buffer_bytes(buf, fixed)
  local d = M.buffer_doc(buf)
  local t = d.text
  if fixed and t ~= "" and t:sub(-1) ~= "\n" and vim.bo[buf].fixeol and not vim.bo[buf].binary then
    t = t .. "\n"
  end
  return (d.bom and M.BOM or "") .. M.wire(t, d.eol)
end

--- The document of a file's bytes, as Neovim would read them: `{ text, eol, bom, body }` where
--- `body` is the bytes without the BOM (the text on the wire) and `text` uses "\n". CRLF when every
--- "\n" follows a "\r" (any other file keeps its "\r" in the text, as a 'fileformat' unix buffer
--- does); `M.wire(text, eol) == body` always.
function M.from_raw(raw)
  local bom = raw:sub(1, 3) == M.BOM
  local body = bom and raw:sub(4) or raw
  local eol, text = "\n", body
  if body:find("\n", 1, true) and not body:find("[^\r]\n") and body:sub(1, 1) ~= "\n" then
    local t = body:gsub("\r\n", "\n")
    if M.wire(t, "\r\n") == body then
      eol, text = "\r\n", t
    end
  end
  return { text = text, eol = eol, bom = bom, body = body }
end

--- Text from the wire (the document's own line breaks, `eol`) to the plugin's "\n" text: only
--- that line break is turned into "\n"; any other "\r" stays text.
function M.to_doc(s, eol)
  if eol == "\n" then
    return s
  end
  return (s:gsub(eol, "\n"))
end

--- Text with "\n" replaced by the line break `eol`.
function M.wire(text, eol)
  if eol == "\n" then
    return text
  end
  return (text:gsub("\n", eol))
end

--- Invalid UTF-8 in `s`: nil, or the count and 0-based offset of the first (`agent_server.utf8`).
M.utf8_invalid = require("agent_server.utf8").invalid

--- sha256 hex of a text as sent on the wire.
function M.sha256(wire_text)
  return vim.fn.sha256(wire_text)
end

--- Lines of a "\n" text (a final "\n" ends the last line, it does not start a new one).
---@return string[] lines, boolean final_newline
function M.split(text)
  if text == "" then
    return { "" }, false
  end
  local final = text:sub(-1) == "\n"
  local body = final and text:sub(1, -2) or text
  return vim.split(body, "\n", { plain = true }), final
end

--- Byte index in `line` of `index` code units of `encoding`, clamped to the line's length.
---@param line string
---@param encoding "utf-8"|"utf-16"|"utf-32"
---@param index integer
---@return integer byte index (0-based)
function M.byteindex(line, encoding, index)
  if index <= 0 then
    return 0
  end
  local ok, b
  if has_011 then
    ok, b = pcall(vim.str_byteindex, line, encoding, index, false)
  elseif encoding == "utf-8" then
    ok, b = true, math.min(index, #line)
  else
    ok, b = pcall(vim.str_byteindex, line, index, encoding == "utf-16")
  end
  if not ok or b == nil or b > #line then
    return #line
  end
  return b
end

--- Code units of `encoding` in the first `byte` bytes of `line` (clamped).
---@return integer
function M.utfindex(line, encoding, byte)
  byte = math.max(0, math.min(byte, #line))
  if has_011 then
    return vim.str_utfindex(line, encoding, byte, false)
  end
  if encoding == "utf-8" then
    return byte
  end
  local u32, u16 = vim.str_utfindex(line, byte)
  return encoding == "utf-16" and u16 or u32
end

--- The 0-based line whose start (`starts`: 0-based offsets, ascending) is the last at or before `offset`.
local function line_of(starts, offset)
  local line = 0
  local lo, hi = 1, #starts
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    if starts[mid] <= offset then
      line = mid - 1
      lo = mid + 1
    else
      hi = mid - 1
    end
  end
  return line
end

--- The index of `text` whose lines start at the 0-based byte offsets `starts` and whose bodies end
--- (before their line break) at `ends`: `offset` (an LSP position's byte offset; past the end of a line
--- or the text clamps, as LSP says) and `position` (`{line, character}` of a byte offset; inside a line
--- break: the end of its line).
local function indexed(text, starts, ends)
  local idx = { text = text, starts = starts }
  function idx.offset(line, character, encoding)
    if line >= #starts then
      return #text
    end
    local s = starts[line + 1]
    return s + M.byteindex(text:sub(s + 1, ends[line + 1]), encoding, character)
  end
  function idx.position(offset, encoding)
    local line = line_of(starts, offset)
    local s = starts[line + 1]
    local e = math.min(offset, ends[line + 1])
    return { line = line, character = M.utfindex(text:sub(s + 1, e), encoding, e - s) }
  end
  return idx
end

--- Offset helper for the buffer rows of one "\n" text (extmarks, `nvim_buf_set_text`; a proposal's
--- ranges are counted on LSP lines: `M.lsp_index`): positions ↔ byte offsets (1-based offsets are not used:
--- offsets here are 0-based byte counts from the start of the text).
---@param text string
function M.index(text)
  local starts, ends = { 0 }, {}
  for pos in text:gmatch("()\n") do
    ends[#ends + 1] = pos - 1 -- the body of the line ends before its "\n" (0-based offset)
    starts[#starts + 1] = pos -- 1-based position of "\n" == 0-based offset of the next line
  end
  ends[#ends + 1] = #text
  local idx = indexed(text, starts, ends)
  --- 0-based (row, byte col) of a byte offset, for extmarks and nvim_buf_set_text.
  function idx.rowcol(offset)
    local p = idx.position(offset, "utf-8")
    return p.line, p.character
  end
  return idx
end

--- Offset helper for the LSP lines of one "\n" text whose line break on the wire is `eol`: LSP
--- (and the server) end a line at "\r\n", "\n" and a lone "\r", while a buffer holds a lone "\r"
--- inside its line, so a proposal's range must be counted on these lines, never on the buffer's
--- rows (`M.index`). A "\r" of the text is a line of its own end, except right before a "\n" of a
--- document whose line break is "\n" (then "\r\n" is one break); with "\r\n" or "\r" on the
--- wire, a "\r" before the text's "\n" stays a lone "\r" there.
---@param text string
---@param eol string
function M.lsp_index(text, eol)
  local starts, ends = { 0 }, {}
  local pos = 1
  while true do
    local at = text:find("[\r\n]", pos)
    if not at then
      break
    end
    ends[#ends + 1] = at - 1 -- the body of the line ends before its break (0-based offset)
    if text:sub(at, at) == "\r" and eol == "\n" and text:sub(at + 1, at + 1) == "\n" then
      at = at + 1
    end
    starts[#starts + 1] = at
    pos = at + 1
  end
  ends[#ends + 1] = #text
  return indexed(text, starts, ends)
end

--- Apply spans `{a0, a1, text}` (byte offsets into `text`, non-overlapping) and return the result.
function M.apply_spans(text, spans)
  table.sort(spans, function(x, y)
    return x[1] < y[1] or (x[1] == y[1] and x[2] < y[2])
  end)
  local out, cursor = {}, 0
  for _, s in ipairs(spans) do
    if s[1] < cursor then
      error("overlapping edits")
    end
    out[#out + 1] = text:sub(cursor + 1, s[1])
    out[#out + 1] = s[3]
    cursor = s[2]
  end
  out[#out + 1] = text:sub(cursor + 1)
  return table.concat(out)
end

--- Make buffer `buf` hold the "\n" text `new`, changing only the lines that differ (one undo step
--- when called from one callback). The buffer's 'eol' follows the text's final newline ('fixeol' is
--- left alone: `buffers.save` writes such a text without it).
function M.set_buffer_text(buf, new)
  local cur = M.buffer_doc(buf).text
  if cur == new then
    return
  end
  local new_lines, final = M.split(new)
  local old_lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local a = table.concat(old_lines, "\n") .. "\n"
  local b = table.concat(new_lines, "\n") .. "\n"
  local hunks = M.diff(a, b, { result_type = "indices", algorithm = "histogram" }) or {}
  for i = #hunks, 1, -1 do
    local sa, ca, sb, cb = unpack(hunks[i])
    local repl = vim.list_slice(new_lines, sb, sb + cb - 1)
    local first = ca == 0 and sa or sa - 1 -- ca == 0: insert after line sa
    vim.api.nvim_buf_set_lines(buf, first, first + ca, false, repl)
  end
  if new ~= "" and vim.bo[buf].eol ~= final then
    vim.bo[buf].eol = final
  end
end

--- Line-level edits turning "\n" text `old` into `new`, as LSP TextEdits (whole buffer lines;
--- positions on the LSP lines of `old` with the line break `eol` on the wire, `M.lsp_index`,
--- counted in `encoding`).
function M.line_edits(old, new, encoding, eol)
  local edits = {}
  local hunks = M.diff(old, new, { result_type = "indices", algorithm = "histogram" }) or {}
  local old_idx = M.index(old)
  local new_idx = M.index(new)
  local old_lsp = M.lsp_index(old, eol or "\n")
  for _, h in ipairs(hunks) do
    local sa, ca, sb, cb = unpack(h)
    local a0 = ca == 0 and sa or sa - 1
    local b0 = cb == 0 and sb or sb - 1
    local s0 = old_idx.offset(a0, 0, "utf-8")
    local s1 = old_idx.offset(a0 + ca, 0, "utf-8")
    local t0 = new_idx.offset(b0, 0, "utf-8")
    local t1 = new_idx.offset(b0 + cb, 0, "utf-8")
    edits[#edits + 1] = {
      range = { start = old_lsp.position(s0, encoding), ["end"] = old_lsp.position(s1, encoding) },
      newText = new:sub(t0 + 1, t1),
    }
  end
  return edits
end

return M
