-- Driven by test_lsp_neovim.py: Neovim's own LSP client (set up as the README says) attaches
-- `agent-server lsp` to an unsaved buffer, runs "Agent: fix this diagnostic", answers the
-- permission question the way a user picks an item, and waits until the edit is in the buffer.
local result = { questions = {}, errors = {} }
local function finish()
  local f = assert(io.open(vim.env.NVIM_RESULT, 'w'))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd('qa!')
end

local ok, err = pcall(function()
  vim.lsp.config('agent_server', {
    cmd = { vim.env.AGENT_SERVER_BIN, 'lsp' },
    filetypes = { 'python' },
    root_markers = { 'pyproject.toml', '.git' },
  })
  vim.lsp.enable('agent_server')

  -- the user answers the question by picking "Allow once" (vim.ui.select is what the
  -- window/showMessageRequest handler shows)
  vim.ui.select = function(items, opts, on_choice)
    table.insert(result.questions, { prompt = opts.prompt, items = vim.tbl_map(function(i) return i.title end, items) })
    for _, item in ipairs(items) do
      if item.title == 'Allow once' then return on_choice(item) end
    end
    on_choice(nil)
  end

  vim.cmd.edit(vim.env.NVIM_FILE)
  vim.bo.filetype = 'python'
  -- unsaved: the buffer differs from the disk
  vim.api.nvim_buf_set_lines(0, 0, -1, false, { 'msg = "héllo 🎉"', 'print(mgs)' })
  local attached = vim.wait(30000, function()
    local clients = vim.lsp.get_clients({ bufnr = 0, name = 'agent_server' })
    return #clients > 0 and clients[1].initialized
  end, 50)
  assert(attached, 'agent-server lsp did not attach')
  local client = vim.lsp.get_clients({ bufnr = 0, name = 'agent_server' })[1]
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
if not ok then table.insert(result.errors, tostring(err)) end
finish()
