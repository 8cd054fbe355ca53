-- Driven by test_lsp_neovim.py: Neovim's own LSP client runs three agentServer.ask turns through
-- `agent-server lsp`, the first from "Agent: fix this problem" on a line with no diagnostic of ours
-- (Neovim passes a server only its own), and counts the windows the transcripts open.
local common = dofile(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)) .. '/nvim_common.lua')
local result = { errors = {}, windows = {}, titles = {} }

common.run(result, function()
  common.enable_server()
  vim.cmd.edit(vim.env.NVIM_FILE)
  vim.bo.filetype = 'python'
  local client = common.attached()
  local file_win = vim.api.nvim_get_current_win()
  local done = 0
  local function count()
    table.insert(result.windows, #vim.api.nvim_tabpage_list_wins(0))
  end
  -- turn 1: the code action on a plain line (gra)
  vim.lsp.buf.code_action({
    filter = function(action)
      table.insert(result.titles, action.title)
      return action.title == 'Agent: fix this problem'
    end,
    apply = true,
  })
  assert(vim.wait(60000, function() return #vim.fn.getbufinfo({ buflisted = 1 }) > 1 end, 50), 'no transcript shown')
  vim.wait(60000, function()
    return vim.iter(vim.api.nvim_list_bufs()):any(function(b)
      return vim.api.nvim_buf_get_name(b):match('transcript%.md$') ~= nil
    end)
  end, 50)
  count()
  -- turns 2 and 3: agentServer.ask from the file's window
  for n = 2, 3 do
    vim.api.nvim_set_current_win(file_win)
    local finished = false
    client:exec_cmd({ title = 'ask', command = 'agentServer.ask', arguments = { {
      uri = vim.uri_from_bufnr(0), prompt = 'question ' .. n } } }, { bufnr = 0 }, function() finished = true end)
    assert(vim.wait(60000, function() return finished end, 50), 'turn ' .. n .. ' did not end')
    vim.wait(200, function() return false end, 20) -- the showDocument request that follows the answer
    done = n
    count()
  end
  result.turns = done
  client:stop()
  vim.wait(10000, function() return client:is_stopped() end, 50)
end)
