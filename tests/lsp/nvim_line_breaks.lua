-- Driven by test_lsp_neovim.py: the README's Neovim snippet (NVIM_SNIPPET) as a user's init.lua, a
-- file whose lines hold a lone CR (or U+2028, a form feed …). Each step of $NVIM_STEPS (JSON) may
-- type text at the end of a row (a didChange the server syncs), then ask a prompt with the
-- snippet's <leader>al (the question answered "Allow once"), wait for the turn's transcript to
-- show its `done` text, save with :w and record the file's bytes.
local common = dofile(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)) .. '/nvim_common.lua')
local result = { errors = {}, saved = {} }

local function transcript_has(text)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_get_name(b):match('transcript%.md$') then
      vim.api.nvim_buf_call(b, function() vim.cmd('silent! edit!') end)
      if table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n'):find(text, 1, true) then
        return true
      end
    end
  end
  return false
end

common.run(result, function()
  dofile(vim.env.NVIM_SNIPPET)
  common.allow_once()
  vim.cmd.edit(vim.env.NVIM_FILE)
  local buf = vim.api.nvim_get_current_buf()
  result.fileformat = vim.bo[buf].fileformat
  local client = common.attached()
  for _, step in ipairs(vim.json.decode(vim.env.NVIM_STEPS)) do
    if step.type_row then
      local line = vim.api.nvim_buf_get_lines(buf, step.type_row, step.type_row + 1, false)[1]
      vim.api.nvim_buf_set_text(buf, step.type_row, #line, step.type_row, #line, { step.text })
    end
    vim.fn.input = function() return step.prompt end
    vim.fn.maparg('<leader>al', 'n', false, true).callback()
    assert(vim.wait(60000, function() return transcript_has(step.done) end, 100), 'no ' .. step.done)
    vim.api.nvim_set_current_buf(buf)
    vim.cmd('write')
    local f = assert(io.open(vim.env.NVIM_FILE, 'rb'))
    table.insert(result.saved, f:read('a'))
    f:close()
  end
  client:stop()
  vim.wait(10000, function() return client:is_stopped() end, 50)
end)
