-- `agent-server lsp` as this plugin's Neovim talks to it (Neovim 0.11 merges this file into
-- `vim.lsp.config('agent_server', …)`, under the user's own settings, and the capabilities into
-- Neovim's own): how its LSP client counts lines, said (docs/protocol.md, *The LSP surface*) — its
-- buffer's rows, ended by "\n" only (a lone "\r" is text of its row), not LSP's "\r\n", "\r", "\n".
return {
  capabilities = { experimental = { agentServer = { lineBreaks = "lf" } } },
}
