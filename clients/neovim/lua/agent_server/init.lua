--- agent-server for Neovim: ask the agent about a selection, watch it work in a chat buffer, and
--- review its edits as diffs, hunk by hunk. See `:help agent-server`.
---
--- This table is the plugin's one public API; the `:Agent*` commands and the keymaps call it.
local M = {}

local config = require("agent_server.config")
local client = require("agent_server.client")

local wired = false

local function notify(msg, level)
  vim.notify("agent-server: " .. msg, level or vim.log.levels.INFO)
end

-- Connect the modules: the server's requests to their handlers, the event stream to the chat.
local function wire()
  if wired then
    return
  end
  wired = true
  local buffers = require("agent_server.buffers")
  local proposals = require("agent_server.proposals")
  local permissions = require("agent_server.permissions")
  local diff = require("agent_server.diff")
  local chat = require("agent_server.chat")
  client.handlers["fs/read_text_file"] = function(req)
    req.reply(buffers.read_text_file(req.params))
  end
  client.handlers["fs/write_text_file"] = function(req)
    req.reply(buffers.write_text_file(req.params))
  end
  client.handlers["_agent_server/apply_workspace_edit"] = function(req)
    proposals.receive(req, client.state.encoding)
  end
  client.handlers["session/request_permission"] = permissions.ask
  proposals.hooks.show = function(p)
    -- a session the chat left (another one is shown): its view opens behind, a notice says whose it is
    local other = chat.left_behind(p.session_id)
    local tab, entered = diff.show(p, require("agent_server.transcript").buf(), other)
    if other then
      chat.notice_for(p.session_id, string.format("proposes %s: in tab %d (%dgt) — :AgentAccept / :AgentReject "
        .. "there", p.label, tab, tab))
    elseif not entered then -- the user was typing: the view opened behind, the chat says where
      chat.say(string.format("%s: proposal opened in tab %d (%dgt to review it, your cursor stayed here) — "
        .. ":AgentAccept / :AgentReject, or gA / gR on its line", p.label, tab, tab))
    end
  end
  proposals.hooks.close = diff.close
  proposals.hooks.say = function(s, session_id)
    chat.say_for(session_id, s)
  end
  proposals.hooks.current = diff.current
  proposals.hooks.merged = diff.merged
  proposals.hooks.stale = function(p, doc, stale, why)
    diff.stale(p, doc, stale, why)
    chat.say_for(p.session_id, stale and string.format("%s: stale — %s while it waited; accepting is refused (%s)", p.label,
      diff.stale_what(doc, why), proposals.is_restore(p) and proposals.restore_way(p)
        or ":AgentAskAgain asks the agent to redo it on the current text, :AgentReject rejects it")
      or string.format("%s: %s holds the text the agent read again; it can be accepted", p.label, doc.name))
  end
  permissions.hooks.asked = function(params, lines)
    return chat.question(params.sessionId, params.toolCall, lines)
  end
  permissions.hooks.answered = chat.outcome
  permissions.hooks.place = chat.question_place
  permissions.hooks.reveal = function()
    chat.open(false)
    vim.cmd("redraw")
  end
  client.on(chat.handle)
  client.on(function(ev)
    if ev.type == "failed" and ev.kind == "held" and ev.session_id and ev.busy then
      -- the session the chat shows could not be resumed after the server died: another process holds it
      return vim.schedule(function()
        local transcript = require("agent_server.transcript")
        local first = type(ev.prompt) == "table" and ev.prompt[1] or nil
        if first and first.type == "text" and transcript.prompt_text() == "" then
          transcript.set_prompt(first.text)
        end
        M.offer_busy(ev.session_id, ev.busy)
      end)
    end
    if ev.type == "failed" and (ev.kind == "auth" or ev.kind == "connection" or ev.kind == "start"
        or ev.kind == "gone") then
      -- a prompt of a session the chat left is not given back to the prompt area (sent from there, it
      -- would go to the session shown); its server-wide ways forward (a key, the endpoint) are offered
      local left = chat.left_behind(ev.session_id)
      if left and ev.kind == "gone" then
        return
      end
      vim.schedule(function() -- after the chat drew the error
        M.way_forward(ev.kind, not left and ev.prompt or nil, ev.session_id)
      end)
    end
  end)
  client.on(function(ev)
    if ev.type == "exit" then
      local tail = (ev.stderr or ""):gsub("%s+$", "")
      tail = tail:sub(-400)
      notify(string.format("the server exited (%s)%s", ev.signal ~= 0 and ("signal " .. ev.signal) or ("code " .. ev.code),
        tail ~= "" and (":\n" .. tail) or ""), vim.log.levels.ERROR)
      -- proposals waiting for the user cannot be answered any more
      for _, p in pairs(proposals.open) do
        p.answered = true
        diff.close(p)
      end
      proposals.open = {}
    elseif ev.type == "cancel" and not ev.idle then
      proposals.user_cancelled()
      permissions.cancel_all(ev.session_id)
    elseif ev.type == "session" and (ev.loaded or ev.resumed) then
      vim.schedule(function() -- after the chat drew the replay: its questions still waiting under their calls
        permissions.session_shown(ev.id)
      end)
    end
  end)
  local group = vim.api.nvim_create_augroup("agent_server", { clear = true })
  local context = require("agent_server.context")
  context.track(vim.api.nvim_get_current_buf())
  vim.api.nvim_create_autocmd("BufEnter", {
    group = group,
    callback = function(ev)
      context.track(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd("BufWritePost", {
    group = group,
    callback = function(ev)
      buffers.after_write(ev.buf)
      buffers.note_disk(ev.buf)
    end,
  })
  vim.api.nvim_create_autocmd("BufReadPost", {
    group = group,
    callback = function(ev)
      buffers.note_disk(ev.buf)
    end,
  })
  -- `agent-server lsp` shows its session's one transcript file every turn (window/showDocument of
  -- the same URI): the buffer already showing it is read again, so the new turn is in it
  local show_document = vim.lsp.handlers["window/showDocument"]
  if show_document then
    vim.lsp.handlers["window/showDocument"] = function(err, result, ctx, cfg)
      local c = ctx and vim.lsp.get_client_by_id(ctx.client_id)
      if c and c.name == "agent_server" and type(result) == "table" and type(result.uri) == "string" then
        local buf = vim.uri_to_bufnr(result.uri)
        if vim.api.nvim_buf_is_loaded(buf) and not vim.bo[buf].modified then
          pcall(vim.api.nvim_buf_call, buf, function()
            vim.cmd("silent! edit!")
          end)
        end
      end
      return show_document(err, result, ctx, cfg)
    end
  end
  -- `agent-server lsp`'s progress, which stock Neovim does not show: echoed
  vim.api.nvim_create_autocmd("LspProgress", {
    group = group,
    callback = function(ev)
      local c = ev.data and vim.lsp.get_client_by_id(ev.data.client_id)
      local value = ev.data and ev.data.params and ev.data.params.value
      if c and c.name == "agent_server" and type(value) == "table" then
        local text = value.kind == "end" and ("done: " .. tostring(value.message or ""))
          or tostring(value.message or value.title or "")
        pcall(vim.api.nvim_echo, { { "agent-server lsp: " .. text .. "  (:AgentCancel cancels)" } }, false, {})
      end
    end,
  })
  vim.api.nvim_create_autocmd("VimLeavePre", {
    group = group,
    callback = function()
      client.stop(true)
    end,
  })
end

--- Start the server ahead of the first prompt (its imports are done by the time a prompt is typed);
--- nothing when it runs or is starting. A failure is said by the command that needs the server.
function M.prestart()
  wire()
  client.ensure_server(function() end)
end

--- Configure the plugin. Every option has a default (`:help agent-server-config`).
---@param opts table|nil
function M.setup(opts)
  local errors = config.setup(opts)
  for _, e in ipairs(errors) do
    notify("configuration: " .. e, vim.log.levels.WARN)
  end
  wire()
  if config.get().start == "eager" then
    -- after start-up, never during it: a deferred start that blocks nothing
    if vim.v.vim_did_enter == 1 then
      vim.schedule(M.prestart)
    else
      vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = vim.schedule_wrap(M.prestart) })
    end
  end
  local keys = config.get().keymaps
  if keys then
    if keys.ask then
      vim.keymap.set("n", keys.ask, "<cmd>AgentAsk<cr>", { desc = "agent-server: ask" })
      vim.keymap.set("x", keys.ask, ":AgentAsk<cr>", { desc = "agent-server: ask about the selection" })
    end
    local open_key = config.open_chat_key()
    if open_key then
      vim.keymap.set("n", open_key, M.chat, { desc = "agent-server: chat" })
    end
    if keys.cancel then
      vim.keymap.set({ "n", "x" }, keys.cancel, M.cancel, { desc = "agent-server: stop the running turn (:AgentStop)" })
    end
  end
end

--- Ask the agent. `prompt`: the question (asked for with `vim.ui.input` when empty); `range`:
--- `{ line1, line2, visual }` of the current buffer, sent as an embedded resource with a `#L` URI.
---@param prompt string|nil
---@param range table|nil
function M.ask(prompt, range)
  wire()
  local blocks = {}
  if range then
    local block, err = require("agent_server.selection").block(vim.api.nvim_get_current_buf(), range)
    if not block then
      return notify(err, vim.log.levels.ERROR)
    end
    blocks[1] = block
  end
  local function send(text)
    if not text or not text:match("%S") then
      return notify("nothing asked")
    end
    local named, err = require("agent_server.context").blocks(text, config.get().cwd or vim.fn.getcwd())
    if not named then
      return notify(err, vim.log.levels.ERROR)
    end
    table.insert(blocks, 1, { type = "text", text = text })
    vim.list_extend(blocks, named)
    require("agent_server.chat").open(false)
    client.prompt(blocks)
  end
  if prompt and prompt:match("%S") then
    send(prompt)
  else
    M.prestart() -- while the question is typed
    vim.ui.input({ prompt = "Ask the agent: " }, send)
  end
end

--- Send what is typed in the chat's prompt area (with the context it names: `#buffer`,
--- `#file:path`, `#selection`, `#diagnostics`) and empty it; a prompt that names context that
--- cannot be given stays, and the reason is said.
function M.send_typed()
  wire()
  local transcript = require("agent_server.transcript")
  local text = transcript.prompt_text()
  if not text:match("%S") then
    return notify("nothing to send: type your prompt below the separator")
  end
  local named, err = require("agent_server.context").blocks(text, config.get().cwd or vim.fn.getcwd())
  if not named then
    return notify(err, vim.log.levels.ERROR)
  end
  transcript.clear_prompt()
  local blocks = { { type = "text", text = text } }
  vim.list_extend(blocks, named)
  client.prompt(blocks)
end

--- The agent's state for a statusline: "off", "idle", "thinking", "running <tool>", "waiting for you".
function M.status()
  return require("agent_server.chat").status()
end

--- Open (or focus) the chat buffer.
function M.chat()
  M.prestart()
  require("agent_server.chat").open(true)
end

-- The `agent-server lsp` clients of this Neovim (README's `vim.lsp.config('agent_server', …)`).
local function lsp_clients()
  return vim.lsp and vim.lsp.get_clients and vim.lsp.get_clients({ name = "agent_server" }) or {}
end

--- Cancel the running turns (`:AgentCancel`, `<C-c>` in the chat): the chat's (ACP) and those of the
--- `agent-server lsp` clients of this Neovim (`agentServer.cancel`), both; "nothing to cancel" only
--- once every one of them said it had no turn. Starts no server.
function M.cancel()
  wire()
  local lsp = lsp_clients()
  local chat_turn = client.busy() and client.cancel()
  if #lsp == 0 then
    if not chat_turn and not client.cancel() then
      notify("no running session")
    end
    return
  end
  local waiting, cancelled = #lsp, 0
  local function answered(_, result)
    waiting = waiting - 1
    cancelled = cancelled + (type(result) == "table" and tonumber(result.cancelled) or 0)
    if waiting > 0 or chat_turn then
      return
    end
    if cancelled > 0 then
      notify(string.format("agent-server lsp: cancelling %d turn%s", cancelled, cancelled == 1 and "" or "s"))
    elseif not client.cancel() then -- the chat says there is nothing to cancel, when it has a session
      notify("nothing to cancel: no turn is running")
    end
  end
  for _, c in ipairs(lsp) do
    local params = { command = "agentServer.cancel", arguments = { vim.empty_dict() } }
    local ok
    if vim.fn.has("nvim-0.11") == 1 then
      ok = c:request("workspace/executeCommand", params, answered)
    else
      ok = c.request("workspace/executeCommand", params, answered)
    end
    if not ok then -- the client is stopping: no answer will come
      answered(nil, nil)
    end
  end
end

--- Restart the server (`:AgentRestart`): the running one is stopped, a new one started, and the
--- session the chat shows is resumed in it (`session/resume`; else the next prompt starts a new one).
function M.restart()
  wire()
  client.restart(function(err)
    if err then
      notify(err, vim.log.levels.ERROR)
    elseif client.state.resumable then
      require("agent_server.chat").say("agent-server was restarted.")
      client.resume_lost(function() end)
    else
      require("agent_server.chat").say("agent-server was restarted; the next prompt starts a new session.")
    end
  end, { resume = true })
end

--- Show the server's log (what it wrote on stderr: the last 8 KiB, of the running server or else the
--- last one) in a scratch buffer, `agent-server://log`.
function M.log()
  local text = client.log()
  local buf = vim.fn.bufnr("agent-server://log")
  if buf == -1 then
    buf = vim.api.nvim_create_buf(true, true)
    vim.bo[buf].buftype = "nofile"
    vim.bo[buf].bufhidden = "hide"
    vim.bo[buf].swapfile = false
    vim.api.nvim_buf_set_name(buf, "agent-server://log")
  end
  local lines = vim.split(text:gsub("%s+$", ""), "\n", { plain = true })
  if text == "" then
    local quiet = "it is quiet at the default log level: AGENT_SERVER_LOG_LEVEL = \"DEBUG\" in "
      .. "require('agent_server').setup({ env = { … } }) and :AgentRestart make it say more"
    if client.pid() then
      lines = { string.format("(the server, pid %d, has written nothing on stderr: %s)", client.pid(), quiet) }
    elseif client.state.last_log ~= nil then
      lines = { "(the last server wrote nothing on stderr: " .. quiet .. ")" }
    else
      lines = { "(no server has run yet in this Neovim: it starts when the chat opens, or with any :Agent command)" }
    end
  end
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = false
  vim.cmd("botright 15split")
  vim.api.nvim_win_set_buf(0, buf)
  vim.api.nvim_win_set_cursor(0, { #lines, 0 })
  return buf
end

--- Sign in (`:AgentLogin`): the server's command with `login` in a terminal (it asks for the
--- provider, the key — not echoed — and the model, and stores the key); when it succeeds the chat
--- says so, and the running server finds the key at the next prompt.
function M.login()
  wire()
  local cmd, why = client.login_cmd()
  if not cmd then
    return notify(why, vim.log.levels.ERROR)
  end
  local chat = require("agent_server.chat")
  vim.cmd("botright 15new")
  local on_exit = function(_, code)
    vim.schedule(function()
      if code == 0 then
        chat.say("signed in: the next prompt uses the stored key")
      else
        chat.say(string.format("agent-server login ended with exit code %d: not signed in", code), "error")
      end
    end)
  end
  local cfg = require("agent_server.config").get()
  -- jobstart() refuses an empty table as `env` (E475: an empty list to Vim): none → Neovim's own
  local opts = { env = next(cfg.env or {}) and cfg.env or nil, cwd = cfg.cwd, on_exit = on_exit }
  local job = vim.fn.has("nvim-0.11") == 1 and vim.fn.jobstart(cmd, vim.tbl_extend("force", opts, { term = true }))
    or vim.fn.termopen(cmd, opts)
  vim.cmd("startinsert")
  return job
end

--- Read a secret from the user (the API key); a function of its own so that a test can answer it.
function M.read_secret(prompt)
  local ok, key = pcall(vim.fn.inputsecret, prompt)
  return ok and key or nil
end

--- Give an API key to this Neovim's server (`:AgentSetKey`): kept in memory only, as `variable`
--- (default `AGENT_SERVER_API_KEY`) of the server's environment; the server is restarted with it.
--- `agent-server login` (`:AgentLogin`) stores a key for good.
function M.set_key(variable)
  wire()
  local key = M.read_secret("API key (kept for this Neovim only): ")
  if not key or not key:match("%S") then
    return notify("no key given")
  end
  local cfg = require("agent_server.config").get()
  cfg.env = vim.tbl_extend("force", cfg.env or {}, { [variable or "AGENT_SERVER_API_KEY"] = vim.trim(key) })
  client.restart(function(err)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    require("agent_server.chat").say("the server was restarted with the key you gave; the next prompt starts a new session")
  end)
end

--- The ways forward after a prompt failed (`kind`: `"auth"` — the key is missing or refused —,
--- `"connection"` — the model endpoint cannot be reached (the server runs: restarting it is the last
--- way, the endpoint's settings and the log come first) —, `"start"` — the server could not start:
--- its log says why —, or `"gone"` — the server no longer has session `session_id`: another
--- agent-server process took it over), offered with `vim.ui.select`, the way that fixes the problem
--- first. The failed prompt is put back in the prompt area (when it is empty) to send again.
function M.way_forward(kind, prompt, session_id)
  local transcript = require("agent_server.transcript")
  local first = type(prompt) == "table" and prompt[1] or nil
  if first and first.type == "text" and transcript.prompt_text() == "" then
    transcript.set_prompt(first.text)
  end
  local choices
  if kind == "auth" then
    choices = {
      { id = "sign-in", label = "Sign in: run `agent-server login` in a terminal (stores the key)" },
      { id = "api-key", label = "Give an API key for this Neovim (the server restarts with it)" },
      { id = "log", label = "Show the server's log" },
      { id = "cancel", label = "Cancel" },
    }
  elseif kind == "gone" then
    choices = {
      { id = "take-back", label = "Take it back here (the other process lets it go)" },
      { id = "new", label = "Start a new session (the prompt is sent there when you send it again)" },
      { id = "cancel", label = "Cancel" },
    }
  elseif kind == "connection" then
    choices = {
      { id = "health", label = "Check the endpoint and model the server uses (:checkhealth agent_server)" },
      { id = "log", label = "Show the server's log (the request's error in full)" },
      { id = "sign-in", label = "Set the endpoint up again: run `agent-server login` in a terminal (checks it answers)" },
      { id = "restart", label = "Restart the server (it runs: only if the endpoint is fine again)" },
      { id = "cancel", label = "Cancel" },
    }
  else
    choices = {
      { id = "log", label = "Show the server's log (why it did not start)" },
      { id = "health", label = "Check the set-up (:checkhealth agent_server)" },
      { id = "restart", label = "Start the server again" },
      { id = "cancel", label = "Cancel" },
    }
  end
  pcall(vim.cmd.redraw) -- the chat's error on screen before a picker (inputlist() blocks) asks about it
  vim.ui.select(choices, {
    prompt = kind == "auth" and "The model endpoint needs a valid API key:"
      or kind == "gone" and string.format("Session %s is no longer open here (taken over by another process):",
        tostring(session_id))
      or kind == "connection" and "The model endpoint could not be reached (the server itself runs):"
      or "agent-server could not start:",
    kind = "agent_server.way_forward",
    format_item = function(c)
      return c.label
    end,
  }, function(choice)
    local id = choice and choice.id
    if id == "sign-in" then
      M.login()
    elseif id == "api-key" then
      M.set_key()
    elseif id == "log" then
      M.log()
    elseif id == "take-back" and session_id then
      M.load(session_id, "take-over")
    elseif id == "new" then
      client.forget_session()
    elseif kind == "gone" then
      require("agent_server.chat").say("the next prompt starts a new session")
    elseif id == "restart" then
      M.restart()
    elseif id == "health" then
      vim.cmd("checkhealth agent_server")
    end
  end)
end

--- Start a new session (the chat keeps the old transcript above).
function M.new()
  M.prestart()
  require("agent_server.chat").open(false)
  client.forget_session()
end

--- "today 14:05", "yesterday 09:30", "2026-11-30 17:02" (local time) for a session's `updatedAt`
--- (an ISO 8601 stamp, UTC), as VS Code's picker says it; anything else as it came.
local function when(stamp)
  local y, mo, d, h, mi, s, zone = (stamp or ""):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)[%.%d]*(.*)$")
  if not y then
    return stamp or ""
  end
  local zs, zh, zm = zone:match("^([+-])(%d%d):?(%d%d)$")
  if zone ~= "Z" and zone ~= "z" and not zs then
    return stamp
  end
  local now = os.time()
  local utc_offset = os.difftime(now, os.time(os.date("!*t", now))) -- this machine's local time - UTC
  local shift = zs and (zs == "+" and -1 or 1) * (tonumber(zh) * 3600 + tonumber(zm) * 60) or 0
  local t = os.time({ year = y, month = mo, day = d, hour = h, min = mi, sec = s, isdst = false })
  t = t + utc_offset + shift
  local day, time = os.date("%Y-%m-%d", t), os.date("%H:%M", t)
  if day == os.date("%Y-%m-%d", now) then
    return "today " .. time
  elseif day == os.date("%Y-%m-%d", now - 86400) then
    return "yesterday " .. time
  end
  return day .. " " .. time
end

--- Pick an earlier session of this workspace with `vim.ui.select` and load it (replayed into the chat).
--- The picker opens once every page of `session/list` is in (the whole list, newest first).
function M.sessions()
  wire()
  client.list_sessions(function(err, sessions, note)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    if note then
      notify(note, vim.log.levels.WARN)
    end
    if #sessions == 0 then
      return notify("no earlier sessions in this workspace")
    end
    vim.ui.select(sessions, {
      prompt = "Load session:",
      kind = "agent_server.session",
      format_item = function(s)
        return string.format("%s  %s  %s", when(s.updatedAt), s.title or "(untitled)", s.sessionId)
      end,
    }, function(choice)
      if not choice then
        return
      end
      M.load(choice.sessionId)
    end)
  end)
end

-- A session another agent-server process holds (`SESSION_BUSY`: a closed code-server tab whose server
-- lives on, another Neovim): the ways forward, picked with `vim.ui.select` (any picker).
function M.offer_busy(id, busy)
  local who = busy.pid and string.format("another agent-server process (pid %d)", busy.pid)
    or "another agent-server process"
  local choices = {}
  if busy.can_take_over then
    choices[#choices + 1] = { id = "take-over",
      label = "Take over here (that process lets it go; a turn running there is cancelled)" }
  end
  choices[#choices + 1] = { id = "copy", label = "Open a copy with the same history (that process keeps it)" }
  choices[#choices + 1] = { id = "cancel", label = "Cancel" }
  pcall(vim.cmd.redraw) -- the chat's "(not loaded)" on screen before a picker (inputlist() blocks)
  vim.ui.select(choices, {
    prompt = string.format("Session %s is open in %s:", id, who),
    kind = "agent_server.session_busy",
    format_item = function(c)
      return c.label
    end,
  }, function(choice)
    if choice and choice.id ~= "cancel" then
      M.load(id, choice.id)
    else
      require("agent_server.chat").say(string.format("session %s was left where it is open", id))
    end
  end)
end

--- Load session `id` into the chat (its history replayed). When another agent-server process holds
--- it, `vim.ui.select` offers *Take over here* (when that process can be asked), *Open a copy*
--- (`session/fork`) and *Cancel*. `how`: `"take-over"` or `"copy"` does that at once.
---@param id string
---@param how string|nil
function M.load(id, how)
  wire()
  local chat = require("agent_server.chat")
  chat.open(false)
  local function loaded(e, busy)
    if busy or e then
      -- the chat's heading now says "(not loaded)": draw it before a picker or a hit-enter prompt
      -- holds the screen (else "(loading …)" stays on it until Enter)
      pcall(vim.cmd.redraw)
    end
    if busy then
      return vim.schedule(function() -- after the chat drew the refusal
        M.offer_busy(id, busy)
      end)
    elseif e then
      notify(e, vim.log.levels.ERROR)
    end
  end
  if how ~= "copy" then
    return client.load_session(id, loaded, { take_over = how == "take-over" })
  end
  client.fork_session(id, function(err, copy)
    if err then
      chat.say(err, "error")
      return notify(err, vim.log.levels.ERROR)
    end
    chat.say(string.format("session %s is a copy of session %s (which stays where it is open)", copy, id))
    client.load_session(copy, function(e)
      if e then
        pcall(vim.cmd.redraw)
        notify(e, vim.log.levels.ERROR)
      end
    end)
  end)
end

--- Switch the session's mode (`mode` id, or pick one).
function M.mode(mode)
  wire()
  local function set(m)
    client.set_mode(m, function(err)
      if err then
        notify(err, vim.log.levels.ERROR)
      end
    end)
  end
  if mode and mode ~= "" then
    return set(mode)
  end
  client.ensure(function(err)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    local modes = (client.state.modes or {}).availableModes or {}
    vim.ui.select(modes, {
      prompt = "Mode:",
      format_item = function(m)
        return m.name .. (m.description and (" — " .. m.description) or "")
      end,
    }, function(choice)
      if choice then
        set(choice.id)
      end
    end)
  end)
end

--- Switch the session's model (`model` id, or pick one when the server lists them).
function M.model(model)
  wire()
  local function set(m)
    client.set_model(m, function(err)
      if err then
        notify(err, vim.log.levels.ERROR)
      end
    end)
  end
  if model and model ~= "" then
    return set(model)
  end
  client.ensure(function(err)
    if err then
      return notify(err, vim.log.levels.ERROR)
    end
    local options = client.models()
    if not options then
      return vim.ui.input({ prompt = "Model id: " }, function(m)
        if m and m ~= "" then
          set(m)
        end
      end)
    end
    vim.ui.select(options, {
      prompt = "Model:",
      format_item = function(o)
        return o.name or o.value
      end,
    }, function(choice)
      if choice then
        set(choice.value)
      end
    end)
  end)
end

local function on_proposal(fn)
  return function(proposal)
    local ok, err = require("agent_server.diff")[fn](proposal)
    if not ok then
      notify(err or "nothing to do", vim.log.levels.WARN)
    end
  end
end

--- Accept the whole proposal in view (with any edits you made to the proposed text); `proposal`
--- (optional): that one instead.
M.accept = on_proposal("accept_all")
--- Reject the whole proposal in view.
M.reject = on_proposal("reject_all")
--- Accept the hunk under the cursor.
M.accept_hunk = on_proposal("accept_hunk")
--- Reject the hunk under the cursor.
M.reject_hunk = on_proposal("reject_hunk")

--- Answer the permission question waiting in the chat with its option `n` (1-based; the chat lists
--- them), or open the picker for it when `n` is nil.
function M.answer(n)
  local ok, err = require("agent_server.permissions").answer(n and tonumber(n) or nil)
  if not ok then
    notify(err or "nothing to answer", vim.log.levels.WARN)
  end
end

--- Ask the agent again on the current text: the open proposal (stale or not) is answered `stale`
--- with that request, or — when it was already answered — a prompt asks for it.
function M.ask_again(proposal)
  wire()
  local ok, err = require("agent_server.proposals").ask_again(proposal, function(text)
    require("agent_server.chat").open(false)
    client.prompt({ { type = "text", text = text } })
  end)
  if not ok then
    notify(err, vim.log.levels.WARN)
  end
end

--- Jump to the next / previous hunk of the proposal in view.
function M.next_hunk()
  require("agent_server.diff").jump(1)
end
function M.prev_hunk()
  require("agent_server.diff").jump(-1)
end

--- Stop the server (its whole process group).
function M.stop()
  client.stop(true)
end

return M
