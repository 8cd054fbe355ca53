--- The selection sent with a prompt: an embedded `resource` block whose URI carries a 1-based
--- inclusive line range (`file:///abs/app.py#L10-L20`) and whose text is the selected text.
---
--- The range is read after leaving visual mode (the `'<` and `'>` marks) and clamped to the
--- buffer: a `V` or `v$` selection ends at the end of its last line, never past it.
local M = {}

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
  local lines
  if opts.visual == "v" or opts.visual == "\22" then
    local s = vim.api.nvim_buf_get_mark(buf, "<")
    local e = vim.api.nvim_buf_get_mark(buf, ">")
    if s[1] == l1 and e[1] == l2 then
      local ok, region = pcall(vim.api.nvim_buf_call, buf, function()
        return vim.fn.getregion(vim.fn.getpos("'<"), vim.fn.getpos("'>"), { type = opts.visual })
      end)
      if ok then
        lines = region
      end
    end
  end
  lines = lines or vim.api.nvim_buf_get_lines(buf, l1 - 1, l2, false)
  local path = vim.fn.fnamemodify(name, ":p")
  return {
    type = "resource",
    resource = {
      uri = vim.uri_from_fname(path) .. string.format("#L%d-L%d", l1, l2),
      text = table.concat(lines, "\n"),
      mimeType = "text/plain",
    },
  }
end

return M
