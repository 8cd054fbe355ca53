-- Set-up of the Neovim started by scripts/try-neovim.sh (settings from $AGENT_SERVER_TRY_CONFIG).
-- Interactive: the plugin loaded on the demo project, the chat open with the banner, and the
-- demo prompt typed in the chat's prompt area (press <CR> there). With "check": headless to the end of the
-- demo task — the prompt typed in the chat's prompt area and sent with <CR> as a user does,
-- permissions allowed once, the proposal accepted — then the chat and the file are printed and
-- Neovim exits (0 when the turn ended normally and calc.py, which --check gives a UTF-8 BOM, was
-- saved with exactly one BOM and no U+FEFF in its text).
local settings = vim.json.decode(io.open(assert(os.getenv("AGENT_SERVER_TRY_CONFIG")), "r"):read("*a"))
for _, p in ipairs({ "python3", "node", "ruby", "perl" }) do
  vim.g["loaded_" .. p .. "_provider"] = 0
end
vim.opt.rtp:prepend(settings.plugin)
vim.cmd("runtime plugin/agent_server.lua")
vim.cmd("filetype plugin indent on | syntax on")
vim.o.splitright = true
local agent = require("agent_server")
agent.setup(settings.setup)
local chat = require("agent_server.chat")
local client = require("agent_server.client")

vim.cmd("edit " .. vim.fn.fnameescape(settings.workspace .. "/calc.py"))
chat.open(false)
chat.say(settings.banner)
chat.say("Try it: the demo prompt is typed below the separator — press <CR> there to send it (or type your own; "
  .. "#buffer sends calc.py's text), then review the diff — :AgentAccept / :AgentReject, :AgentAcceptHunk / "
  .. ":AgentRejectHunk, ]h [h — and watch the tool calls here. :help agent-server")

if not settings.check then
  vim.schedule(function()
    vim.api.nvim_echo({ { settings.banner:sub(1, 120) .. " …", "WarningMsg" } }, true, {})
    require("agent_server.transcript").set_prompt(settings.prompt)
    chat.open(true)
    vim.api.nvim_win_set_cursor(0, { vim.api.nvim_buf_line_count(0), 0 })
  end)
  return
end

-- --check: messages (the diff view's hint, notifications) each on their own stdout line: headless
-- Neovim writes them to stderr with no line break after the last one, gluing it to what follows
local function out_line(s)
  io.stdout:write(s, "\n")
end
vim.notify = function(msg)
  out_line(tostring(msg))
end
vim.api.nvim_echo = function(chunks)
  local parts = {}
  for _, c in ipairs(chunks or {}) do
    parts[#parts + 1] = tostring(c[1])
  end
  out_line(table.concat(parts))
end

-- --check: answer for the user, and say so in the chat
vim.ui.select = function(items, opts, on_choice)
  for _, it in ipairs(items) do
    if it.optionId == "allow_once" then
      chat.say("(--check allows once: " .. tostring(opts.prompt) .. ")")
      return on_choice(it)
    end
  end
  on_choice(nil)
end
local proposals = require("agent_server.proposals")
local diff = require("agent_server.diff")
local show = proposals.hooks.show
proposals.hooks.show = function(p)
  show(p)
  vim.schedule(function()
    chat.say("(--check accepts the proposal: " .. p.label .. ")")
    diff.accept_all()
  end)
end
local stop
client.on(function(ev)
  if ev.type == "turn_end" then
    stop = ev.stop_reason or ("error: " .. tostring(ev.error))
  elseif ev.type == "exit" then
    stop = "the server exited"
  end
end)
-- the prompt typed at the end of the chat and sent with <CR>, through the plugin's own mapping
chat.open(true)
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("Gi" .. settings.prompt .. "<Esc>", true, false, true), "nx", false)
out_line("(--check typed the prompt in the chat's prompt area and pressed <CR>)")
vim.api.nvim_feedkeys(vim.api.nvim_replace_termcodes("<CR>", true, false, true), "mx", false)
local say = out_line
local ok = vim.wait(240000, function()
  return stop ~= nil
end, 50)
say(chat.text())
say("\n--- calc.py (buffer) ---")
local buf = require("agent_server.buffers").find(settings.workspace .. "/calc.py")
say(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"))
say("--- calc.py saved: " .. tostring(not vim.bo[buf].modified) .. " ---")
local raw = require("agent_server.buffers").read_disk(settings.workspace .. "/calc.py") or ""
local bom = "\239\187\191"
local one_bom = raw:sub(1, 3) == bom and raw:sub(4, 6) ~= bom and vim.bo[buf].bomb
  and not vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1]:find("\239\187\191", 1, true)
say("--- calc.py on disk: " .. (one_bom and "one BOM, kept" or "BOM lost or doubled") .. " ---")
client.stop(true)
-- :cquit and :qa!, never os.exit(): Neovim's own exit removes its server socket and the folder it made
-- for it in $TMPDIR (os.exit() left both behind, every run)
if not ok or stop ~= "end_turn" then
  say("try-neovim --check: the turn did not end normally: " .. tostring(stop or "timed out"))
  vim.cmd("cquit 1")
end
if not one_bom then
  say("try-neovim --check: calc.py's BOM was not kept exactly once")
  vim.cmd("cquit 1")
end
vim.cmd("qa!")
