-- What the Neovim scripts of test_lsp_neovim.py share: each runs its body, records what failed,
-- writes its result as JSON to $NVIM_RESULT and quits; the server is set up as the README says.
-- Loaded by each with dofile (its folder: the script's own).
local M = {}

-- Run `body` (a failure is added to `result.errors`), write `result` to $NVIM_RESULT, quit.
function M.run(result, body)
  local ok, err = pcall(body)
  if not ok then
    table.insert(result.errors, tostring(err))
  end
  local f = assert(io.open(vim.env.NVIM_RESULT, 'w'))
  f:write(vim.json.encode(result))
  f:close()
  vim.cmd('qa!')
end

-- `agent-server lsp` ($AGENT_SERVER_BIN) for Python files, as the README configures it.
function M.enable_server()
  vim.lsp.config('agent_server', {
    cmd = { vim.env.AGENT_SERVER_BIN, 'lsp' },
    filetypes = { 'python' },
    root_markers = { 'pyproject.toml', '.git' },
  })
  vim.lsp.enable('agent_server')
end

-- The agent_server client of the current buffer, once attached and initialized (30 s at most).
function M.attached()
  local attached = vim.wait(30000, function()
    local clients = vim.lsp.get_clients({ bufnr = 0, name = 'agent_server' })
    return #clients > 0 and clients[1].initialized
  end, 50)
  assert(attached, 'agent-server lsp did not attach')
  return vim.lsp.get_clients({ bufnr = 0, name = 'agent_server' })[1]
end

-- The user answers every question by picking "Allow once" (vim.ui.select is what the
-- window/showMessageRequest handler shows); each question is added to `questions` when given.
function M.allow_once(questions)
  vim.ui.select = function(items, opts, on_choice)
    if questions then
      table.insert(questions, { prompt = opts.prompt, items = vim.tbl_map(function(i) return i.title end, items) })
    end
    for _, item in ipairs(items) do
      if item.title == 'Allow once' then return on_choice(item) end
    end
    on_choice(nil)
  end
end

return M
