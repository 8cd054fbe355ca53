--- Settings of the plugin: defaults, `setup(opts)` merging and validation.
---
--- Role: one table of options every other module reads through `config.get()`. Validation
--- collects human-readable errors (shown by `:checkhealth agent_server` and once at setup)
--- instead of throwing, so a typo never breaks the editor.
---
--- Must never: print or store secrets it is not given (environment values are passed to the
--- server process only, and `:checkhealth` shows variable names, never values).
local M = {}

--- The defaults; `setup()` alone works with them.
---@class agent_server.Config
---@field cmd string[]|nil argv of the server; nil: `agent-server` found on $PATH
---@field env table<string,string> extra environment for the server process
---@field cwd string|nil workspace root sent as `session/new.cwd`; nil: the current directory
---@field model string|nil model id switched to after each new session (`/model`), nil: the server's
---@field mode string|nil mode id set after each new session, nil: the server's default
---@field position_encodings string[] offered position encodings, preferred first
---@field redraw_ms integer at most one chat redraw per this many milliseconds
---@field chat table { position = "right"|"left"|"below"|"tab", width = integer, height = integer }
---@field keymaps table|false global, chat and diff-view keymaps (false: none); values are lhs or false
---@field start "lazy"|"eager" when the server starts: "lazy" when the chat opens or an :Agent* command
---other than a prompt runs (a prompt starts it too, and waits for it), "eager" right after start-up
M.defaults = {
  cmd = nil,
  start = "lazy",
  env = {},
  cwd = nil,
  model = nil,
  mode = nil,
  position_encodings = { "utf-16", "utf-8" },
  redraw_ms = 50,
  chat = { position = "right", width = 80, height = 20 },
  keymaps = {
    ask = "<leader>aa", -- normal and visual: :AgentAsk
    open_chat = "<leader>ac", -- :AgentChat (a string `chat`, the older name, is this key too)
    cancel = "<leader>ax",
    -- buffer-local in the chat:
    chat = {
      send = "<CR>", -- normal mode, in the prompt area (on a tool line: open its location)
      send_insert = "<C-s>", -- insert (and normal) mode
      cancel = "<C-c>",
      close = "q",
      next_turn = "]]",
      prev_turn = "[[",
      accept = "gA", -- the proposal of the tool line under the cursor (else the latest)
      reject = "gR",
    },
    -- buffer-local in the diff view of a proposal:
    accept = "gA",
    reject = "gR",
    accept_hunk = "ga",
    reject_hunk = "gr",
    next_hunk = "]h",
    prev_hunk = "[h",
    close = "q",
  },
}

local options = vim.deepcopy(M.defaults)
local errors = {}

local ENCODINGS = { ["utf-8"] = true, ["utf-16"] = true, ["utf-32"] = true }

local function validate(opts)
  local errs = {}
  local function check(name, ok, want)
    if not ok then
      errs[#errs + 1] = string.format("option '%s': expected %s, got %s", name, want, vim.inspect(opts[name]))
    end
  end
  check("cmd", opts.cmd == nil or (type(opts.cmd) == "table" and #opts.cmd > 0 and vim.iter(opts.cmd):all(function(a)
    return type(a) == "string"
  end)), "a non-empty list of strings")
  check("env", type(opts.env) == "table", "a table of strings")
  if type(opts.env) == "table" then
    for k, v in pairs(opts.env) do
      if type(k) ~= "string" or (type(v) ~= "string" and type(v) ~= "number") then
        errs[#errs + 1] = string.format("option 'env': entry %s must be a string", vim.inspect(k))
      end
    end
  end
  check("cwd", opts.cwd == nil or type(opts.cwd) == "string", "a folder path")
  check("model", opts.model == nil or type(opts.model) == "string", "a model id")
  check("mode", opts.mode == nil or type(opts.mode) == "string", "a mode id")
  check("start", opts.start == "lazy" or opts.start == "eager", '"lazy" or "eager"')
  check("redraw_ms", type(opts.redraw_ms) == "number" and opts.redraw_ms >= 1, "a number >= 1")
  check("keymaps", opts.keymaps == false or type(opts.keymaps) == "table", "a table or false")
  if type(opts.keymaps) == "table" then
    local chat = opts.keymaps.chat
    if not (chat == nil or chat == false or type(chat) == "string" or type(chat) == "table") then
      errs[#errs + 1] = "option 'keymaps.chat': expected a table of keys (or the :AgentChat key), got " .. vim.inspect(chat)
      opts.keymaps.chat = vim.deepcopy(M.defaults.keymaps.chat)
    end
  end
  local encs = opts.position_encodings
  local encs_ok = type(encs) == "table" and #encs > 0
  if encs_ok then
    for _, e in ipairs(encs) do
      encs_ok = encs_ok and ENCODINGS[e] == true
    end
  end
  check("position_encodings", encs_ok, 'a list of "utf-16", "utf-8", "utf-32"')
  local chat = opts.chat
  check(
    "chat",
    type(chat) == "table" and vim.tbl_contains({ "right", "left", "below", "tab" }, chat.position),
    '{ position = "right"|"left"|"below"|"tab", width = n, height = n }'
  )
  return errs
end

--- Merge `opts` over the defaults and validate. Invalid options are reported (returned, kept for
--- `:checkhealth`) and replaced by their defaults, so the plugin keeps working.
---@param opts table|nil
---@return string[] errors
function M.setup(opts)
  opts = opts or {}
  local merged = vim.tbl_deep_extend("force", vim.deepcopy(M.defaults), opts)
  if opts.keymaps == false then
    merged.keymaps = false
  end
  errors = validate(merged)
  for _, e in ipairs(errors) do
    local name = e:match("^option '([%w_]+)'")
    if name and M.defaults[name] ~= nil or name == "cmd" then
      merged[name] = vim.deepcopy(M.defaults[name])
    end
  end
  options = merged
  return errors
end

--- The chat buffer's keys (`keymaps.chat` as a table; a string there is the older :AgentChat key,
--- which leaves the chat's own keys at their defaults), or nil when keymaps are off.
function M.chat_keys()
  local keys = options.keymaps
  if not keys or keys.chat == false then
    return nil
  end
  if type(keys.chat) == "table" then
    return vim.tbl_extend("force", M.defaults.keymaps.chat, keys.chat)
  end
  return M.defaults.keymaps.chat
end

--- The key that opens the chat (:AgentChat), or nil.
function M.open_chat_key()
  local keys = options.keymaps
  if not keys then
    return nil
  end
  if type(keys.chat) == "string" then
    return keys.chat
  end
  return keys.open_chat or nil
end

--- The current options (after `setup`, else the defaults).
---@return agent_server.Config
function M.get()
  return options
end

--- Configuration errors of the last `setup()`.
---@return string[]
function M.errors()
  return errors
end

--- argv that starts the server: `cmd`, else `agent-server` on $PATH; nil and a reason when not found.
---@return string[]|nil argv, string|nil why
--- The command comes from setup() only (your config; a project's .nvim.lua runs only after :trust).
--- A bare name is resolved to an absolute path here, and refused when $PATH found it inside the
--- current directory (a relative $PATH entry such as "." or "node_modules/.bin"): a cloned
--- repository, or a command the agent ran, could put an `agent-server` there.
---@return string[]|nil argv, string|nil why
function M.server_cmd()
  local cmd = options.cmd and vim.deepcopy(options.cmd) or { "agent-server" }
  if vim.fn.executable(cmd[1]) ~= 1 then
    if options.cmd then
      return nil, string.format("the configured server command '%s' is not executable", cmd[1])
    end
    return nil, "'agent-server' is not on $PATH (install it, or set cmd in setup())"
  end
  if not cmd[1]:find("/", 1, true) then
    local exe = vim.fn.exepath(cmd[1])
    local cwd = vim.fn.resolve(vim.fn.getcwd())
    local real = vim.fn.resolve(exe)
    if exe == "" or real:sub(1, #cwd + 1) == cwd .. "/" or not vim.startswith(exe, "/") then
      return nil, string.format("'%s' was found through $PATH inside the current folder (%s): not started "
        .. "(a relative $PATH entry); set an absolute cmd in setup()", cmd[1], exe)
    end
    cmd[1] = exe
  end
  return cmd
end

return M
