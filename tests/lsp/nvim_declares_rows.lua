-- Driven by test_lsp_neovim.py: the README's configuration with the plugin of clients/neovim on the
-- runtimepath; the server's stdin is recorded ($NVIM_WIRE) by its command, a shell `tee`.
local common = dofile(vim.fs.dirname(debug.getinfo(1, 'S').source:sub(2)) .. '/nvim_common.lua')
local result = { errors = {} }

common.run(result, function()
  vim.opt.rtp:prepend(vim.env.NVIM_PLUGIN)
  vim.lsp.config('agent_server', {
    cmd = { 'sh', '-c', 'tee "$0" | "$1" lsp', vim.env.NVIM_WIRE, vim.env.AGENT_SERVER_BIN },
    filetypes = { 'python' },
    root_markers = { 'pyproject.toml', '.git' },
  })
  vim.lsp.enable('agent_server')
  vim.cmd.edit(vim.env.NVIM_FILE)
  vim.bo.filetype = 'python'
  local client = common.attached()
  result.experimental = client.capabilities.experimental
end)
