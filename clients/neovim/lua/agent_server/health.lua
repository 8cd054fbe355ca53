--- `:checkhealth agent_server` (and `agent-server`, the plugin's name: `lua/agent-server/health.lua`):
--- Neovim version, configuration errors, the server and its version, whether the model endpoint answers.
---
--- Must never: print a secret (environment values are never shown, only their names).
local M = {}

local MIN = { 0, 10, 0 }

--- The checks, once in one `:checkhealth` run (its report buffer): `:checkhealth` alone runs both
--- `agent-server` and `agent_server`; the second one says where the report is.
function M.check_once(name)
  local buf = vim.api.nvim_get_current_buf()
  local done = vim.b[buf].agent_server_checked
  if done then
    vim.health.start("agent-server")
    vim.health.info(string.format("the same checks as under %s above", done))
    return
  end
  vim.b[buf].agent_server_checked = name
  M.run()
end

function M.check()
  M.check_once("agent_server")
end

--- Every check.
function M.run()
  local health = vim.health
  local config = require("agent_server.config")
  local client = require("agent_server.client")

  health.start("agent-server: Neovim")
  local v = vim.version()
  local version = string.format("%d.%d.%d", v.major, v.minor, v.patch)
  if vim.fn.has("nvim-0.10") == 1 then
    health.ok("Neovim " .. version .. " (0.10 or newer is supported)")
  else
    health.error(string.format("Neovim %s is too old: 0.%d or newer is needed", version, MIN[2]))
  end

  health.start("agent-server: configuration")
  local errors = config.errors()
  if #errors == 0 then
    health.ok("setup() options are valid")
  else
    for _, e in ipairs(errors) do
      health.error(e, { "fix the option in require('agent_server').setup({...}); its default is used meanwhile" })
    end
  end
  local env = vim.tbl_keys(config.get().env or {})
  table.sort(env)
  if #env > 0 then
    health.info("environment for the server sets: " .. table.concat(env, ", ") .. " (values not shown)")
  end

  health.start("agent-server: server")
  local cmd, why = config.server_cmd()
  if not cmd then
    health.error(why, {
      "install it from a checkout of its repository: bash scripts/setup.sh, then use .venv/bin/agent-server "
        .. "(or pip install . in the checkout); agent-server is not published on PyPI",
      "or point setup({ cmd = { '/path/to/agent-server' } }) at it",
    })
  else
    local argv = vim.list_extend(vim.deepcopy(cmd), { "--version" })
    local ok, res = pcall(function()
      return vim.system(argv, { text = true, env = config.get().env }):wait(10000)
    end)
    local exe = vim.fn.exepath(cmd[1])
    if ok and res.code == 0 and (res.stdout or ""):match("%S") then
      health.ok(string.format("server: %s — %s", exe ~= "" and exe or cmd[1], vim.trim(res.stdout)))
    else
      health.error(string.format("'%s --version' failed%s", table.concat(cmd, " "),
        ok and (": " .. vim.trim((res.stderr or "") .. " exit " .. tostring(res.code))) or (": " .. tostring(res))))
    end
  end
  if cmd then
    -- the configuration as the server reads it (its file and environment): an error is shown here
    -- rather than at the first prompt
    -- `--probe`: the server asks the endpoint as `agent-server login` does (GET <base_url>/models, a short
    -- timeout, the key never shown); a server without it is asked without
    local function run(extra)
      local argv = vim.list_extend(vim.deepcopy(cmd), vim.list_extend({ "--check-config", "--json" }, extra))
      local ok, res = pcall(function()
        return vim.system(argv, { text = true, env = config.get().env }):wait(20000)
      end)
      return argv, ok, res
    end
    local argv, ok, res = run({ "--probe" })
    if ok and res.code ~= 0 and (res.stderr or ""):match("unknown argument '%-%-probe'") then
      argv, ok, res = run({})
    end
    local parsed, read = false, nil
    if ok and (res.stdout or ""):match("^%s*{") then
      parsed, read = pcall(vim.json.decode, res.stdout or "", { luanil = { object = true, array = true } })
    end
    if not ok then
      health.error("'" .. table.concat(argv, " ") .. "' could not run: " .. tostring(res))
    elseif parsed and type(read) == "table" and read.ok ~= false then
      M.model_setup(health, read)
    elseif res.code == 0 then
      health.ok(vim.trim(res.stdout or ""))
    elseif (res.stderr or ""):match("unknown argument") then
      health.warn("this server cannot check its configuration (no --check-config): update it")
    else
      health.error(vim.trim((res.stderr or "") .. (res.stdout or "")), {
        "fix the config file (agent-server reads $XDG_CONFIG_HOME/agent-server/config.toml, or --config PATH in cmd)",
      })
    end
  end
  local pid = client.pid()
  if pid then
    local st = client.state
    health.info(string.format("running: pid %d, session %s, position encoding %s, edit proposals %s", pid,
      tostring(st.session_id), st.encoding, st.extension and "on" or "off (plain ACP)"))
    if st.bad_lines > 0 then
      health.warn(string.format("%d line(s) from the server were not JSON and were skipped", st.bad_lines))
    end
  else
    health.info("no server running (it starts when the chat opens, or with any :Agent command)")
  end
end

local SET_UP = {
  ":AgentLogin signs in: `agent-server login` asks for the provider, the API key and the model, and keeps them",
  "or give them to this Neovim's server: require('agent_server').setup({ env = { AGENT_SERVER_BASE_URL = "
    .. "\"https://…\", AGENT_SERVER_MODEL = \"…\", AGENT_SERVER_API_KEY = \"…\" } }) (:AgentSetKey for the key alone)",
}

--- What `--check-config --json` says of the model set-up (`read`), as a first prompt needs it: an
--- endpoint, a model, a key where the profile needs one (its source named, never its value).
function M.model_setup(health, read)
  local profile = tostring(read.profile or "?")
  local where = type(read.source) == "string" and ("config file " .. read.source)
    or "no config file (defaults and the environment)"
  health.ok(string.format("configuration read: %s; profile '%s'", where, profile))
  local missing
  if type(read.baseUrl) ~= "string" or read.baseUrl == "" then
    missing = string.format("no model endpoint is set up (profile '%s' has no base URL)", profile)
  elseif type(read.model) ~= "string" or read.model == "" then
    missing = string.format("no model is set up for profile '%s'", profile)
  elseif read.keyRequired == true and type(read.keySource) ~= "string" then
    missing = string.format("profile '%s' needs an API key and none is set (%s)", profile,
      tostring(read.keyVariable or "AGENT_SERVER_API_KEY"))
  end
  if missing then
    return health.error(missing .. ": a prompt cannot be sent yet", SET_UP)
  end
  local what = string.format("model %s at %s; API key: %s", read.model, read.baseUrl,
    type(read.keySource) == "string" and ("from " .. read.keySource) or "none needed")
  local reached = read.endpoint
  if type(reached) ~= "table" then
    return health.warn(what .. " (the endpoint was not asked: this server has no --check-config --probe)")
  end
  if reached.ok == true then
    return health.ok(what .. " — " .. tostring(reached.message))
  end
  health.error(what .. ": " .. tostring(reached.message), {
    "check that the endpoint runs and the base URL is right (it usually ends in /v1)",
    SET_UP[1],
  })
end

return M
