--- The selection sent with a prompt: an embedded `resource` block whose URI carries a 1-based
--- inclusive line range (`file:///abs/app.py#L10-L20`) and whose text is the selected text.
---
--- The range is read after leaving visual mode (the `'<` and `'>` marks) and clamped to the
--- buffer: a `V` or `v$` selection ends at the end of its last line, never past it.
---
--- Lines are the file's as the server counts them (its `read` tool: ended by `\n`; a lone `\r`
--- is inside a line), selected lines joined with `\n`: a buffer's rows are those lines in a unix or
--- dos buffer, not in a `'fileformat'` mac one (rows ended by `\r`; a `\n` of the file is a `\r`
--- in its row), whose range is converted and whose rows are joined as in the file.
local M = {}

-- The file's lines (1-based, ended by `\n`) holding `rows`, the selected parts of rows `l1`..`l2`
-- of mac buffer `buf` (the first starting at byte `col` of its row), and their text as in the file
-- (rows ended by `\r`; a `\r` inside a row is a `\n` of the file).
local function mac_range(buf, l1, col, rows)
  local breaks = 0 -- the file's `\n` before the selection
  for _, r in ipairs(vim.api.nvim_buf_get_lines(buf, 0, l1 - 1, false)) do
    breaks = breaks + select(2, r:gsub("\r", ""))
  end
  local row = vim.api.nvim_buf_get_lines(buf, l1 - 1, l1, false)[1] or ""
  breaks = breaks + select(2, row:sub(1, col):gsub("\r", ""))
  local parts = {}
  for i, r in ipairs(rows) do
    parts[i] = r:gsub("\r", "\n")
  end
  local text = table.concat(parts, "\r")
  local first = breaks + 1
  return first, first + select(2, text:gsub("\n$", ""):gsub("\n", "")), text
end

--- Text and lines of a range of `buf`.
---@param buf integer
---@param opts { line1: integer, line2: integer, visual: string|nil } visual: "v", "V" or "\22" when the
---   range came from a visual selection (the marks are used for columns)
---@return table|nil block, string|nil err
function M.block(buf, opts)
  local name = vim.api.nvim_buf_get_name(buf)
  if name == "" then
    return nil, "the selection's buffer has no file name"
  end
  local n = vim.api.nvim_buf_line_count(buf)
  local l1 = math.max(1, math.min(opts.line1, n))
  local l2 = math.max(l1, math.min(opts.line2, n))
  local lines, col = nil, 0
  if opts.visual == "v" or opts.visual == "\22" then
    local s = vim.api.nvim_buf_get_mark(buf, "<")
    local e = vim.api.nvim_buf_get_mark(buf, ">")
    if s[1] == l1 and e[1] == l2 then
      local ok, region = pcall(vim.api.nvim_buf_call, buf, function()
        return vim.fn.getregion(vim.fn.getpos("'<"), vim.fn.getpos("'>"), { type = opts.visual })
      end)
      if ok then
        lines, col = region, opts.visual == "v" and s[2] or 0
      end
    end
  end
  lines = lines or vim.api.nvim_buf_get_lines(buf, l1 - 1, l2, false)
  local path = vim.fn.fnamemodify(name, ":p")
  local first, last, text = l1, l2, table.concat(lines, "\n")
  if vim.bo[buf].fileformat == "mac" then
    first, last, text = mac_range(buf, l1, col, lines)
  end
  return {
    type = "resource",
    resource = {
      uri = vim.uri_from_fname(path) .. string.format("#L%d-L%d", first, last),
      text = text,
      mimeType = "text/plain",
    },
  }
end

return M
