-- agent-server for Neovim: the :Agent* commands (`:help agent-server-commands`).
-- Nothing starts until a command runs; call require("agent_server").setup() to change options.
if vim.g.loaded_agent_server then
  return
end
vim.g.loaded_agent_server = true

if vim.fn.has("nvim-0.10") == 0 then
  vim.api.nvim_echo({ { "agent-server needs Neovim 0.10 or newer", "ErrorMsg" } }, true, {})
  return
end

local function api()
  return require("agent_server")
end

local command = vim.api.nvim_create_user_command

command("AgentAsk", function(o)
  local range
  if o.range > 0 then
    local visual
    local vs, ve = vim.fn.line("'<"), vim.fn.line("'>")
    if vs == o.line1 and ve == o.line2 then
      visual = vim.fn.visualmode()
    end
    range = { line1 = o.line1, line2 = o.line2, visual = visual ~= "" and visual or nil }
  end
  api().ask(o.args, range)
end, { nargs = "*", range = true, desc = "Ask the agent (with a range: about the selected lines)" })

command("AgentChat", function()
  api().chat()
end, { desc = "Open the agent's chat" })

command("AgentCancel", function()
  api().cancel()
end, { desc = "Cancel the agent's running turn" })

-- Stop from any window: the chat's <C-c> is the chat's key only (a file buffer's <C-c> keeps
-- its Vim meaning); bind <Plug>(AgentStop) to a key of your own for insert mode too.
command("AgentStop", function()
  api().cancel()
end, { desc = "Stop the agent's running turn (as :AgentCancel), from any window" })
vim.keymap.set({ "n", "x", "i" }, "<Plug>(AgentStop)", "<Cmd>AgentStop<CR>", { desc = "agent-server: stop the running turn" })

command("AgentNew", function()
  api().new()
end, { desc = "Start a new agent session" })

command("AgentRestart", function()
  api().restart()
end, { desc = "Restart the agent server (the next prompt starts a new session)" })

command("AgentLogin", function()
  api().login()
end, { desc = "Sign in: agent-server login in a terminal" })

command("AgentSetKey", function()
  api().set_key()
end, { desc = "Give the agent server an API key for this Neovim (it restarts)" })

command("AgentLog", function()
  api().log()
end, { desc = "Show the agent server's log (its stderr)" })

command("AgentSessions", function()
  api().sessions()
end, { desc = "Load an earlier agent session" })

command("AgentMode", function(o)
  api().mode(o.args)
end, {
  nargs = "?",
  desc = "Switch the agent's mode",
  complete = function() -- the server's modes once a session has them
    local modes = ((package.loaded["agent_server.client"] or {}).state or {}).modes
    local ids = {}
    for _, m in ipairs(modes and modes.availableModes or {}) do
      ids[#ids + 1] = m.id
    end
    return #ids > 0 and ids or { "read-only", "workspace-write", "accept-edits", "danger-full-access" }
  end,
})

command("AgentModel", function(o)
  api().model(o.args)
end, { nargs = "?", desc = "Switch the agent's model" })

command("AgentAccept", function()
  api().accept()
end, { desc = "Accept the agent's proposed edit" })

command("AgentReject", function()
  api().reject()
end, { desc = "Reject the agent's proposed edit" })

command("AgentAnswer", function(o)
  api().answer(o.args ~= "" and o.args or nil)
end, { nargs = "?", desc = "Answer the agent's permission question (its option N; none: a picker)" })

command("AgentAcceptHunk", function()
  api().accept_hunk()
end, { desc = "Accept the hunk under the cursor" })

command("AgentRejectHunk", function()
  api().reject_hunk()
end, { desc = "Reject the hunk under the cursor" })

command("AgentAskAgain", function()
  api().ask_again()
end, { desc = "Have the agent redo its proposed edit on the file's current text" })
