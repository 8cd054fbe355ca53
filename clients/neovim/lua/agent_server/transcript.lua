--- The chat's buffer as text: lines appended at the end, streamed text continued on its open line,
--- and blocks (a tool line, the plan) replaced in place at an extmark.
---
--- Role: the drawing half of the chat. `chat` folds the client's events and decides what to draw;
--- this module only knows lines, the header line, the one open streamed line and marks. The buffer
--- is `nofile`, not modifiable by the user, and its first line is the header.
---
--- Must never: know ACP (turns, tool calls, sessions), or move a block's mark off its first line:
--- a mark is placed at column 0 with left gravity, and blocks are replaced as text (`nvim_buf_set_text`)
--- from their mark, so text appended after them, or a block redrawn above them, keeps them in place.
local M = {}

local ns = vim.api.nvim_create_namespace("agent_server_chat")

local S = {
  buf = nil,
  open = nil, -- kind of the streamed line still open at the end: "text" | "thought" | "user" | nil
}

--- Whether the buffer exists.
function M.valid()
  return S.buf ~= nil and vim.api.nvim_buf_is_valid(S.buf)
end

local function modify(fn)
  vim.bo[S.buf].modifiable = true
  local ok, err = pcall(fn)
  vim.bo[S.buf].modifiable = false
  vim.bo[S.buf].modified = false
  if not ok then
    error(err)
  end
end

-- Keep windows that showed the end of the buffer (at or below `before_last`) at its end.
local function follow(before_last)
  for _, win in ipairs(vim.fn.win_findbuf(S.buf)) do
    local row = vim.api.nvim_win_get_cursor(win)[1]
    if row >= before_last then
      local n = vim.api.nvim_buf_line_count(S.buf)
      pcall(vim.api.nvim_win_set_cursor, win, { n, 0 })
    end
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
  S.open = nil
  modify(function()
    vim.api.nvim_buf_set_lines(S.buf, 0, -1, false, { header, "" })
  end)
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

--- Append whole lines (this ends the open streamed line); an empty last line is reused.
---@param lines string[]
---@return integer row 0-based row of the first added line
function M.add_lines(lines)
  local n = vim.api.nvim_buf_line_count(S.buf)
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
  return vim.api.nvim_buf_line_count(S.buf) - #lines
end

--- Continue streamed text of `kind` (`"text"`, `"thought"`: lines quoted with `> `, `"user"`): on the
--- open line when it is of the same kind, else from a new line.
---@param kind string
---@param s string
function M.stream(kind, s)
  if s == "" then
    return
  end
  local n = vim.api.nvim_buf_line_count(S.buf)
  local last = vim.api.nvim_buf_get_lines(S.buf, n - 1, n, false)[1]
  local lines = vim.split(s, "\n", { plain = true })
  if kind == "thought" then
    for i = 2, #lines do
      lines[i] = "> " .. lines[i]
    end
  end
  modify(function()
    if S.open == kind then
      lines[1] = last .. lines[1]
      vim.api.nvim_buf_set_lines(S.buf, n - 1, n, false, lines)
    else
      if kind == "thought" then
        lines[1] = "> " .. lines[1]
      end
      if last == "" then
        vim.api.nvim_buf_set_lines(S.buf, n - 1, n, false, lines)
      else
        vim.api.nvim_buf_set_lines(S.buf, n, n, false, lines)
      end
    end
  end)
  S.open = kind
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
--- nothing when the mark is gone.
function M.replace_at(mark, count, lines)
  local row = M.mark_row(mark)
  if not row then
    return
  end
  local last_row = row + count - 1
  local last = vim.api.nvim_buf_get_lines(S.buf, last_row, last_row + 1, false)[1] or ""
  modify(function()
    vim.api.nvim_buf_set_text(S.buf, row, 0, last_row, #last, lines)
  end)
end

--- The buffer's text ("" when there is none).
function M.text()
  if not M.valid() then
    return ""
  end
  return table.concat(vim.api.nvim_buf_get_lines(S.buf, 0, -1, false), "\n")
end

return M
