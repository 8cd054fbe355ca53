-- Driven by test_lsp_neovim.py: Neovim's own LSP client (set up as the README says) attaches
-- `agent-server lsp` to an unsaved buffer, runs "Agent: fix this diagnostic", answers the
-- permission question the way a user picks an item, and waits until the edit is in the buffer.
local common = dofile(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)) .. '/nvim_common.lua')
local result = { questions = {}, errors = {} }

common.run(result, function()
  common.enable_server()

  common.allow_once(result.questions)

  vim.cmd.edit(vim.env.NVIM_FILE)
  vim.bo.filetype = 'python'
  -- unsaved: the buffer differs from the disk
  vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'msg = "héllo 🎉"', 'print(mgs)' })
  local client = common.attached()
  result.encoding = client.offset_encoding

  local diagnostic = {
    range = { start = { line = 1, character = 6 }, ['end'] = { line = 1, character = 9 } },
    message = "undefined name 'mgs'", severity = 1, source = 'pyflakes',
  }
  vim.api.nvim_win_set_cursor(0, { 2, 6 })
  vim.lsp.buf.code_action({
    context = { diagnostics = { diagnostic } },
    filter = function(action) return action.title == 'Agent: fix this diagnostic' end,
    apply = true,
  })
  local bufnr = vim.fn.bufnr(vim.env.NVIM_FILE)
  local landed = vim.wait(90000, function()
    return vim.api.nvim_buf_get_lines(bufnr, 1, 2, false)[1] == 'print(msg)'
  end, 50)
  result.landed = landed
  result.lines = vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)
  result.modified = vim.bo[bufnr].modified
  -- let the command's answer and the last document sync arrive, then stop the server cleanly
  vim.wait(3000, function() return false end, 50)
  client:stop()
  vim.wait(10000, function() return client:is_stopped() end, 50)
end)
