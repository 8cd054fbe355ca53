--- The chat's buffer as text: the transcript (lines appended at its end, streamed text continued on
--- its open line, blocks — a tool line, the plan — replaced in place at an extmark), then the prompt
--- area the user types in, below a separator line.
---
--- Role: the drawing half of the chat. `chat` folds the client's events and decides what to draw;
--- this module only knows lines, the header line, the one open streamed line, marks, and where the
--- transcript ends (the separator's mark). The buffer is `nofile`; its first line is the header.
--- The transcript is the plugin's: it is 'nomodifiable' while the cursor is in it, and a change that
--- reaches it anyway (an operator over both parts, a join) is undone at once. The prompt area is the
--- user's: what is typed there survives streaming above it. Text the plugin draws is written with
--- 'undolevels' -1, so it never enters the user's undo history (`u` never takes back the agent's text).
---
--- Must never: know ACP (turns, tool calls, sessions), or move a block's mark off its first line:
--- a mark is placed at column 0 with left gravity, and blocks are replaced as text (`nvim_buf_set_text`)
--- from their mark, so text appended after them, or a block redrawn above them, keeps them in place.
local M = {}

local ns = vim.api.nvim_create_namespace("agent_server_chat")
-- the chat's own lines (a sign model text cannot make), and the rows of thoughts (folded)
local ns_own = vim.api.nvim_create_namespace("agent_server_chat_own")
local ns_thought = vim.api.nvim_create_namespace("agent_server_chat_thought")

--- The sign of the chat's own lines (section headers, stop lines, tool lines, notes).
M.OWN_SIGN = "▍"
vim.api.nvim_set_hl(0, "AgentServerChatOwn", { default = true, link = "Special" })

--- The separator line between the transcript and the prompt area.
M.SEPARATOR = "─── your prompt ───"

local S = {
  buf = nil,
  open = nil, -- kind of the streamed line still open at the end: "text" | "thought" | "user" | nil;
  -- "held" when it was held (`M.hold`): lines appended after it never reuse it
  open_raw = "", -- that line's text as streamed (before its filter)
  open_filter = nil, -- that line's filter, until it is told the line is complete
  open_key = nil, -- that stream's key (the chunks' `messageId`), or nil
  held = {}, -- key -> { kind, raw, filter, mark }: streams that go on where they were (`M.hold`)
  sep = nil, -- extmark on the separator line
  writing = false, -- the plugin is changing the buffer (not the user)
  hint = nil, -- the separator's virtual text
}

--- Whether the buffer exists.
function M.valid()
  return S.buf ~= nil and vim.api.nvim_buf_is_valid(S.buf)
end

--- 0-based row of the separator: the transcript is rows [0, sep), the prompt area rows (sep, end].
function M.sep_row()
  local m = vim.api.nvim_buf_get_extmark_by_id(S.buf, ns, S.sep, {})
  return m[1]
end

--- Whether 0-based `row` is in the prompt area.
function M.in_prompt(row)
  return M.valid() and row > M.sep_row()
end

-- 'modifiable' follows the cursor of the current window when it shows the chat: only the prompt
-- area may be typed in.
function M.guard()
  if not M.valid() or S.writing then
    return
  end
  if vim.api.nvim_get_current_buf() == S.buf then
    local row = vim.api.nvim_win_get_cursor(0)[1] - 1
    vim.bo[S.buf].modifiable = row > M.sep_row()
  end
end

local function modify(fn)
  local buf = S.buf
  local ul = vim.api.nvim_get_option_value("undolevels", { buf = buf })
  S.writing = true
  vim.bo[buf].modifiable = true
  vim.bo[buf].undolevels = -1 -- the agent's text never enters the user's undo history
  local ok, err = pcall(fn)
  vim.bo[buf].undolevels = ul
  vim.bo[buf].modified = false
  S.writing = false
  M.guard()
  if not ok then
    error(err)
  end
end

-- Keep windows that showed the end of the transcript (at or below `before_last`, 1-based, and not
-- in the prompt area) at its end; a cursor in the prompt area moves down with it by itself.
local function follow(before_last)
  local sep = M.sep_row()
  for _, win in ipairs(vim.fn.win_findbuf(S.buf)) do
    local row = vim.api.nvim_win_get_cursor(win)[1]
    if row >= before_last and row <= sep then
      pcall(vim.api.nvim_win_set_cursor, win, { sep, 0 })
    end
  end
end

-- A change the user made to the transcript (or the separator) is undone at once.
local function watch(buf)
  vim.api.nvim_buf_attach(buf, false, {
    on_lines = function(_, b, _, first)
      if S.writing or b ~= S.buf then
        return
      end
      if first <= M.sep_row() then
        vim.schedule(function()
          if vim.api.nvim_buf_is_valid(b) then
            pcall(vim.api.nvim_buf_call, b, function()
              vim.cmd("silent! undo")
            end)
            vim.bo[b].modified = false
            M.guard()
          end
        end)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ "CursorMoved", "CursorMovedI", "BufEnter", "InsertEnter" }, {
    buffer = buf,
    callback = M.guard,
  })
  vim.api.nvim_create_autocmd({ "TextChanged", "TextChangedI" }, {
    buffer = buf,
    callback = function()
      vim.bo[buf].modified = false -- a chat is never "unsaved": :qa needs no !
      if vim.api.nvim_buf_line_count(buf) == M.sep_row() + 1 then
        modify(function() -- the prompt area keeps a line to type in
          vim.api.nvim_buf_set_lines(buf, -1, -1, false, { "" })
        end)
      end
    end,
  })
end

--- The prompt area's text (trailing blank lines left out).
function M.prompt_text()
  if not M.valid() then
    return ""
  end
  local lines = vim.api.nvim_buf_get_lines(S.buf, M.sep_row() + 1, -1, false)
  return (table.concat(lines, "\n"):gsub("%s+$", ""))
end

--- Put `text` into the prompt area (replacing what it holds).
function M.set_prompt(text)
  if M.valid() then
    modify(function()
      vim.api.nvim_buf_set_lines(S.buf, M.sep_row() + 1, -1, false, vim.split(text, "\n", { plain = true }))
    end)
  end
end

--- Empty the prompt area (one empty line).
function M.clear_prompt()
  modify(function()
    vim.api.nvim_buf_set_lines(S.buf, M.sep_row() + 1, -1, false, { "" })
  end)
end

--- The separator's hint (virtual text at its end), e.g. the keys that send.
function M.set_hint(hint)
  S.hint = hint
  if M.valid() then
    vim.api.nvim_buf_set_extmark(S.buf, ns, M.sep_row(), 0, {
      id = S.sep,
      right_gravity = true,
      virt_text = hint and { { " " .. hint, "Comment" } } or nil,
      virt_text_pos = "eol",
    })
  end
end

--- The buffer (`agent-server://chat`, markdown), created on first use with `header` as its first
--- line and an empty second one; `created` is true when it was made by this call.
---@param header string
---@return integer buf, boolean created
function M.buffer(header)
  if M.valid() then
    return S.buf, false
  end
  S.buf = vim.api.nvim_create_buf(true, true)
  vim.bo[S.buf].buftype = "nofile"
  vim.bo[S.buf].bufhidden = "hide"
  vim.bo[S.buf].swapfile = false
  pcall(vim.api.nvim_buf_set_name, S.buf, "agent-server://chat")
  vim.bo[S.buf].filetype = "markdown"
  S.open, S.open_raw, S.open_filter, S.open_key, S.held = nil, "", nil, nil, {}
  S.writing = true
  vim.api.nvim_buf_set_lines(S.buf, 0, -1, false, { header, "", M.SEPARATOR, "" })
  S.sep = vim.api.nvim_buf_set_extmark(S.buf, ns, 2, 0, { right_gravity = true })
  S.writing = false
  M.set_hint(S.hint)
  modify(function() end) -- no undo history, not modified
  watch(S.buf)
  return S.buf, true
end

--- Replace the header (the first line); nothing when there is no buffer.
function M.set_header(header)
  if M.valid() then
    modify(function()
      vim.api.nvim_buf_set_lines(S.buf, 0, 1, false, { header })
    end)
  end
end

--- Tell the open streamed line's filter that the line is complete (once); the line stays open.
function M.finish_line()
  local f = S.open_filter
  S.open_filter = nil
  if f and f.done then
    f.done(S.open_raw)
  end
end

--- Append whole lines (this ends the open streamed line); an empty last line is reused.
---@param lines string[]
---@return integer row 0-based row of the first added line
function M.add_lines(lines)
  M.finish_line()
  local n = M.sep_row()
  local last = vim.api.nvim_buf_get_lines(S.buf, n - 1, n, false)[1]
  modify(function()
    if last == "" and S.open == nil then
      vim.api.nvim_buf_set_lines(S.buf, n - 1, n, false, lines)
    else
      vim.api.nvim_buf_set_lines(S.buf, n, n, false, lines)
    end
  end)
  S.open = nil
  follow(n)
  return M.sep_row() - #lines
end

--- Mark 0-based `row` as the chat's own line: a sign in the sign column, which text cannot make.
function M.mark_own(row)
  vim.api.nvim_buf_set_extmark(S.buf, ns_own, row, 0, {
    right_gravity = false,
    sign_text = M.OWN_SIGN,
    sign_hl_group = "AgentServerChatOwn",
  })
end

--- Whether 0-based `row` is one of the chat's own lines (`mark_own`).
function M.is_own(row)
  return M.valid() and #vim.api.nvim_buf_get_extmarks(S.buf, ns_own, { row, 0 }, { row, -1 }, { limit = 1 }) > 0
end

--- Whether 0-based `row` is a line of a thought.
function M.is_thought(row)
  if S.thoughts and row >= S.thoughts[1] and row <= S.thoughts[2] then
    return true
  end
  return M.valid() and #vim.api.nvim_buf_get_extmarks(S.buf, ns_thought, { row, 0 }, { row, -1 }, { limit = 1 }) > 0
end

-- The rows of `raws` (a stream's lines, the first one continuing its open line) as drawn.
local function drawn(kind, raws, filter)
  local lines = {}
  for i, raw in ipairs(raws) do
    local line = filter and filter.show(raw) or raw
    lines[i] = kind == "thought" and ("> " .. line) or line
    if i < #raws and filter and filter.done then
      filter.done(raw)
    end
  end
  return lines
end

--- Hold the open streamed line when its stream has a key (lines drawn next — a slash command's
--- exchange while the answer streams — go below it, and the stream goes on where it was, never split
--- by them: `stream` with that key); nothing for a stream without a key. A stream held inside a
--- fenced code block gets the chat's closing fence below it while the block is open (what is drawn
--- below is never code), taken away once the model closes the block. Whether it was held.
---@return boolean
function M.hold()
  if not M.valid() or S.open == nil or S.open == "held" or S.open_key == nil then
    return false
  end
  local h = { kind = S.open, raw = S.open_raw, filter = S.open_filter, mark = M.place_mark(M.sep_row() - 1) }
  S.held[S.open_key] = h
  S.open, S.open_filter = "held", nil
  M.fence_below(h, M.sep_row() - 1)
  return true
end

-- Whether raw line `raw` (complete or not) closes a block opened with `fence`.
local function closes(fence, raw)
  local marker = raw:match("^ ? ? ?(```+)%s*$") or raw:match("^ ? ? ?(~~~+)%s*$")
  return marker ~= nil and marker:sub(1, 1) == fence:sub(1, 1) and #marker >= #fence
end

--- The chat's closing fence below held stream `h` (its last line at 0-based `row`) while its code
--- block is open, none once it is closed.
function M.fence_below(h, row)
  local fence = h.filter and h.filter.fence
  local open = fence ~= nil and not closes(fence, h.raw)
  if open and not h.closer then
    modify(function()
      vim.api.nvim_buf_set_lines(S.buf, row + 1, row + 1, false, { fence })
    end)
    M.mark_own(row + 1)
    h.closer = true
  elseif not open and h.closer then
    for _, m in ipairs(vim.api.nvim_buf_get_extmarks(S.buf, ns_own, { row + 1, 0 }, { row + 1, -1 }, {})) do
      vim.api.nvim_buf_del_extmark(S.buf, ns_own, m[1])
    end
    modify(function()
      vim.api.nvim_buf_set_lines(S.buf, row + 1, row + 2, false, {})
    end)
    h.closer = nil
  end
end

--- Whether the stream of `key` is held (`M.hold`); with `kind`, held as a stream of that kind.
function M.holds(key, kind)
  local h = key ~= nil and S.held[key]
  return h ~= nil and h ~= false and (kind == nil or h.kind == kind)
end

--- Let the held streams go: their text, if more comes, starts at the end again.
function M.release()
  for _, h in pairs(S.held) do
    if M.valid() then
      pcall(vim.api.nvim_buf_del_extmark, S.buf, ns, h.mark)
    end
  end
  S.held = {}
end

-- Continue held stream `h` of `key` on its own line, above what was drawn after it.
local function continue_held(key, h, s)
  local row = M.mark_row(h.mark)
  if not row then
    S.held[key] = nil
    return false
  end
  local raws = vim.split(s, "\n", { plain = true })
  raws[1] = h.raw .. raws[1]
  local lines = drawn(h.kind, raws, h.filter)
  local n = M.sep_row()
  if h.kind == "thought" then
    S.thoughts = { row, row + #lines - 1 }
  end
  modify(function()
    vim.api.nvim_buf_set_lines(S.buf, row, row + 1, false, lines)
  end)
  if h.kind == "thought" then
    for r = row, row + #lines - 1 do
      vim.api.nvim_buf_set_extmark(S.buf, ns_thought, r, 0, { right_gravity = false })
    end
    S.thoughts = nil
  end
  h.raw = raws[#raws]
  vim.api.nvim_buf_del_extmark(S.buf, ns, h.mark)
  h.mark = M.place_mark(row + #lines - 1)
  M.fence_below(h, row + #lines - 1)
  follow(n)
  return true
end

--- Continue streamed text of `kind` (`"text"`, `"thought"`: lines quoted with `> `, `"user"`): on the
--- open line when it is of the same kind and key, on its own line when its stream is held
--- (`M.hold`), else from a new line. `filter` (optional):
--- `{ show = fun(raw): string, done = fun(raw) }` — how a line of the stream is drawn (called again
--- as an open line grows, with the whole line so far), and that a line is complete. `key`
--- (optional): the stream's key, the chunks' `messageId`.
---@param kind string
---@param s string
---@param filter table|nil
---@param key string|nil
function M.stream(kind, s, filter, key)
  if s == "" then
    return
  end
  local h = key and S.held[key]
  if h and h.kind == kind and continue_held(key, h, s) then
    return
  end
  local n = M.sep_row()
  local last = vim.api.nvim_buf_get_lines(S.buf, n - 1, n, false)[1]
  local raws = vim.split(s, "\n", { plain = true })
  local continued = S.open == kind and S.open_key == key
  if continued then
    raws[1] = S.open_raw .. raws[1]
  else
    M.finish_line() -- the line of another kind is complete
  end
  local lines = drawn(kind, raws, filter)
  local first = (continued or (last == "" and S.open ~= "held")) and n - 1 or n
  local skip = continued and 1 or 0 -- rows at the start that are not new lines of this stream
  if not continued and last ~= "" then
    -- a paragraph of its own, never read (rendered) as the rest of the line above: a tool line, a note
    table.insert(lines, 1, "")
    skip = 1
  end
  if kind == "thought" then -- the fold expression runs as the lines change: before their marks exist
    S.thoughts = { first + skip, first + #lines - 1 }
  end
  modify(function()
    vim.api.nvim_buf_set_lines(S.buf, first, n, false, lines)
  end)
  if kind == "thought" then
    for row = first + skip, first + #lines - 1 do
      vim.api.nvim_buf_set_extmark(S.buf, ns_thought, row, 0, { right_gravity = false })
    end
    S.thoughts = nil
  end
  S.open, S.open_raw, S.open_filter, S.open_key = kind, raws[#raws], filter, key
  follow(n)
end

--- A mark on the first line of a block starting at `row` (0-based).
---@return integer mark
function M.place_mark(row)
  return vim.api.nvim_buf_set_extmark(S.buf, ns, row, 0, { right_gravity = false })
end

--- The 0-based row of `mark`, or nil when it is gone (the buffer was wiped).
function M.mark_row(mark)
  if not (mark and M.valid()) then
    return nil
  end
  local m = vim.api.nvim_buf_get_extmark_by_id(S.buf, ns, mark, {})
  return m and m[1]
end

--- Replace the `count` lines of the block at `mark` with `lines` (the mark stays on the first one);
--- nothing when the mark is gone. `own` (optional): which of `lines` (1-based) are the chat's own
--- lines (`mark_own`), the others not; without it the block's first line keeps its sign. Windows
--- that showed the end of the transcript still do when the block is at its end.
function M.replace_at(mark, count, lines, own)
  local row = M.mark_row(mark)
  if not row then
    return
  end
  local last_row = row + count - 1
  local last = vim.api.nvim_buf_get_lines(S.buf, last_row, last_row + 1, false)[1] or ""
  local n = M.sep_row()
  modify(function()
    vim.api.nvim_buf_set_text(S.buf, row, 0, last_row, #last, lines)
  end)
  if own then -- the signs of the replaced lines collapsed onto the block's rows: drawn again
    for _, m in ipairs(vim.api.nvim_buf_get_extmarks(S.buf, ns_own, { row, 0 }, { row + #lines - 1, -1 }, {})) do
      vim.api.nvim_buf_del_extmark(S.buf, ns_own, m[1])
    end
    for _, i in ipairs(own) do
      if lines[i] and lines[i] ~= "" then
        M.mark_own(row + i - 1)
      end
    end
  end
  if last_row == n - 1 then
    follow(n)
  end
end

--- Insert `lines` above 0-based `row` of the transcript (what was drawn from there moves down).
function M.insert_lines(row, lines)
  modify(function()
    vim.api.nvim_buf_set_lines(S.buf, row, row, false, lines)
  end)
end

--- Forget `mark` (a block that is done).
function M.forget_mark(mark)
  if mark and M.valid() then
    pcall(vim.api.nvim_buf_del_extmark, S.buf, ns, mark)
  end
end

--- The transcript's text, without the prompt area ("" when there is no buffer).
function M.text()
  if not M.valid() then
    return ""
  end
  return table.concat(vim.api.nvim_buf_get_lines(S.buf, 0, M.sep_row(), false), "\n")
end

--- The chat buffer, or nil.
function M.buf()
  return M.valid() and S.buf or nil
end

return M
