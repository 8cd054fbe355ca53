-- Driven by test_lsp_neovim.py: the README's Neovim snippet (NVIM_SNIPPET) as a user's init.lua;
-- its <leader>al keymap asks for a prompt with vim.fn.input, whose <Tab> completion is read here the
-- way Neovim reads it (getcompletion with the input's own `completion`), then answered with a slash
-- command; the ask runs it and the session's transcript shows it.
local common = dofile(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)) .. '/nvim_common.lua')
local result = { errors = {}, completions = {} }

common.run(result, function()
  dofile(vim.env.NVIM_SNIPPET)
  vim.cmd.edit(vim.env.NVIM_FILE)
  vim.bo.filetype = 'python'
  common.attached()
  vim.fn.input = function(opts)
    result.prompt = opts.prompt
    for _, typed in ipairs({ '/', '/u', '/mo', 'fix /u' }) do
      result.completions[typed] = vim.fn.getcompletion(typed, opts.completion)
    end
    return '/usage'
  end
  local keymap = vim.fn.maparg('<leader>al', 'n', false, true)
  assert(keymap.callback, 'the README defines no <leader>al keymap')
  keymap.callback()
  local transcript
  assert(vim.wait(60000, function()
    for _, b in ipairs(vim.api.nvim_list_bufs()) do
      if vim.api.nvim_buf_get_name(b):match('transcript%.md$') then
        vim.api.nvim_buf_call(b, function() vim.cmd('silent! edit!') end)
        transcript = table.concat(vim.api.nvim_buf_get_lines(b, 0, -1, false), '\n')
        if transcript:find('## Command /usage', 1, true) then
          return true
        end
      end
    end
  end, 100), 'the ask of /usage showed no transcript')
  result.transcript = transcript
end)
