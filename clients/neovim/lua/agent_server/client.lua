--- The ACP side: initialize (with our `_meta.agentServer` block), sessions, prompts, cancel.
---
--- Role: owns the one server process of this editor (through `rpc`), starts it on demand and again
--- after it died, and turns everything the server says into one stream of events for the views:
---   { type = "session", id, modes, configOptions, loaded, resumed }  (`resumed`: the session open when
---                                                     the server died, reattached by `session/resume`)
---   { type = "session_lost", id, reason, busy }         (that session could not be resumed; `busy`:
---                                                     another agent-server process holds it)
---   { type = "update", session_id, update }            (session/update)
---   { type = "turn_start", prompt, session_id }  { type = "turn_end", stop_reason | error, session_id } (the
---                                                     session the prompt was sent in: the chat may show
---                                                     another one by the time it ends)
---   { type = "exit", code, signal, stderr, restarting, why } (the server died; `restarting`: it is started
---                                                     again at once and the session open then resumed,
---                                                     else `why` not — after 3 deaths within a minute —)
---   { type = "restart_failed", error }                 (that start or resume failed: the next prompt tries)
---   { type = "info", text }                            (a line for the chat)
---   { type = "commands", commands }                    (the slash commands `initialize` lists, before any
---                                                     session: `_meta.agentServer.availableCommands`)
---   { type = "failed", error, kind, prompt, session_id } (a prompt failed: kind "auth" | "connection" | "start" |
---                                                     "gone" — the server no longer has the session (also
---                                                     after `:AgentMode`/`:AgentModel`: no prompt) — |
---                                                     "stopped" — this Neovim stopped the server —,
---                                                     "held" — the session to resume is held by another
---                                                     agent-server process (`session_id`, `busy`) — | nil)
--- Requests of the server are routed to `M.handlers[method](req)` (set by the plugin).
---
--- Must never: touch a buffer or a window.
local config = require("agent_server.config")
local rpc_mod = require("agent_server.rpc")

local M = {}

M.VERSION = "0.1.0"

--- method -> function(req) answering a request of the server (req.reply(result, err)).
M.handlers = {}

local state = {
  rpc = nil,
  starting = false,
  waiters = {},
  listeners = {},
  session_id = nil,
  resumable = nil, -- the session open when the server died: the next prompt resumes it
  encoding = "utf-16",
  extension = false,
  agent_info = nil,
  modes = nil,
  config_options = nil,
  turns = 0, -- turns running (prompts sent and not answered)
  session_turns = {}, -- of those, per session: session id -> count
  bad_lines = 0,
  crashes = {}, -- when the server died (uv.now()), within the last minute
}
M.state = state

--- A server that dies is started again at once, unless it died more than this many times within
--- `CRASH_WINDOW_MS` (then the next prompt starts it).
M.MAX_CRASHES = 3
M.CRASH_WINDOW_MS = 60000

local uv = vim.uv or vim.loop

--- Subscribe to the event stream.
---@param fn fun(ev: table)
function M.on(fn)
  state.listeners[#state.listeners + 1] = fn
end

local function emit(ev)
  for _, fn in ipairs(state.listeners) do
    local ok, err = pcall(fn, ev)
    if not ok then
      vim.notify("agent-server: " .. tostring(err), vim.log.levels.ERROR)
    end
  end
end
M.emit = emit

local function cwd()
  return vim.fn.fnamemodify(config.get().cwd or vim.fn.getcwd(), ":p"):gsub("/$", "")
end

local function on_request(_, req)
  local handler = M.handlers[req.method]
  if not handler then
    req.reply(nil, { code = -32601, message = "method not found: " .. tostring(req.method) })
    return
  end
  handler(req)
end

local function track(update)
  local kind = update.sessionUpdate
  if kind == "current_mode_update" and state.modes then
    state.modes.currentModeId = update.currentModeId
  elseif kind == "config_option_update" then
    state.config_options = update.configOptions
  end
end

local function on_notification(_, method, params)
  if method == "session/update" and type(params) == "table" and type(params.update) == "table" then
    if params.sessionId == state.session_id or state.loading == params.sessionId then
      track(params.update)
    end
    emit({ type = "update", session_id = params.sessionId, update = params.update })
  end
end

local function on_exit(r, code, signal, tail)
  if state.rpc ~= r then
    return
  end
  state.rpc = nil
  if not r.stopping then
    state.resumable = state.session_id or state.resumable
  end
  state.session_id = nil
  state.last_log = r.stderr
  local was_running = state.turns > 0
  state.turns, state.session_turns = 0, {}
  local restarting, why = false, nil
  if not r.stopping then
    -- started again at once, as VS Code does, unless it keeps dying (or its stream broke): the
    -- session open then is resumed (`M.resume_lost`); nothing waits for the next prompt
    local now = uv.now()
    local recent = { now }
    for _, t in ipairs(state.crashes) do
      if now - t < M.CRASH_WINDOW_MS then
        recent[#recent + 1] = t
      end
    end
    state.crashes = recent
    if r.stream_lost then
      why = "the connection broke"
    elseif not r.ready then -- it never answered `initialize`: a start that failed, said by what needed it
      why = "it exited while starting"
    elseif #recent > M.MAX_CRASHES then
      why = string.format("it exited %d times within a minute", #recent)
    end
    restarting = why == nil
    emit({ type = "exit", code = code, signal = signal, stderr = tail, during_turn = was_running, lost = r.stream_lost,
      restarting = restarting, why = why, session = state.resumable })
  end
  local waiters = state.waiters
  state.waiters, state.starting = {}, false
  for _, w in ipairs(waiters) do
    w("the server exited while starting: " .. (tail ~= "" and tail or ("exit code " .. tostring(code))))
  end
  if restarting then
    state.restart_due = true
    vim.schedule(function() -- after the requests it left open have failed
      state.restart_due = false
      if state.rpc or state.starting then -- a prompt or a command started it meanwhile
        return
      end
      local function failed(err, busy, id)
        if busy then -- another agent-server process took it meanwhile: the ways forward are offered
          emit({ type = "failed", error = err, kind = "held", session_id = id, busy = busy })
        elseif err and not state.rpc and not state.restart_due then -- (died again: started once more)
          emit({ type = "restart_failed", error = err })
        end
      end
      if state.resumable then
        M.resume_lost(failed)
      else
        M.ensure_server(failed)
      end
    end)
  end
end

local function finish_start(err)
  local waiters = state.waiters
  state.waiters, state.starting = {}, false
  for _, w in ipairs(waiters) do
    w(err)
  end
end

local function after_session(result)
  state.modes = result.modes
  state.config_options = result.configOptions
  local cfg = config.get()
  if cfg.mode then
    M.set_mode(cfg.mode)
  end
  if cfg.model then
    M.set_model(cfg.model)
  end
end

--- Leave the current session: the next prompt (or a mode/model choice) starts a new one, so a
--- `:AgentNew` that is never followed by a prompt leaves no empty session in the server's list.
function M.forget_session()
  state.session_id, state.resumable = nil, nil
  emit({ type = "new_session" })
end

--- Start a new session in the running server. `cb(err)`.
function M.new_session(cb)
  cb = cb or function() end
  M.ensure_server(function(err)
    if err then
      return cb(err)
    end
    state.rpc:request("session/new", { cwd = cwd(), mcpServers = {} }, function(e, result)
      if e then
        -- in words: no method name, and not the code's name ("Authentication required: "), which the
        -- way forward (sign in) says better
        local msg = M.error_text(e)
        if e.code == -32000 then
          msg = msg:gsub("^Authentication required: ", "")
        end
        return cb("could not start a session: " .. msg, M.error_kind(e))
      end
      state.session_id, state.resumable = result.sessionId, nil
      after_session(result)
      emit({ type = "session", id = result.sessionId, modes = result.modes, configOptions = result.configOptions })
      cb(nil)
    end)
  end)
end

--- Make sure a server runs and is initialized. `cb(err)` on the main loop.
function M.ensure_server(cb)
  if state.rpc and state.initialized then
    return cb(nil)
  end
  state.waiters[#state.waiters + 1] = cb
  if state.starting then
    return
  end
  state.starting = true
  local cmd, why = config.server_cmd()
  if not cmd then
    return finish_start(why)
  end
  local cfg = config.get()
  local r, err = rpc_mod.start({
    cmd = cmd,
    env = cfg.env,
    cwd = cwd(),
    on_request = on_request,
    on_notification = on_notification,
    on_exit = on_exit,
    on_bad_line = function()
      state.bad_lines = state.bad_lines + 1
    end,
  })
  if not r then
    return finish_start(err)
  end
  state.rpc, state.initialized = r, false
  r:request("initialize", {
    protocolVersion = 1,
    clientCapabilities = {
      fs = { readTextFile = true, writeTextFile = true },
      terminal = false,
      -- the sign-in runs `<cmd> login` in a terminal (`:AgentLogin`, the way forward): the server's
      -- words then name the editor's sign-in, not "run it in a terminal"
      auth = { terminal = true },
      _meta = {
        terminal_output = true, -- a shell command's live output (display only: docs/protocol.md)
        agentServer = {
          version = 1,
          bufferVersions = true,
          applyWorkspaceEdit = true,
          positionEncodings = cfg.position_encodings,
        },
      },
    },
    clientInfo = { name = "agent-server.nvim", title = "agent-server for Neovim", version = M.VERSION },
  }, function(e, result)
    if e then
      return finish_start("initialize failed: " .. tostring(e.message))
    end
    local caps = result.agentCapabilities or {}
    local ext = (caps._meta or {}).agentServer
    state.extension = type(ext) == "table" and ext.applyWorkspaceEdit == true
    state.encoding = (type(ext) == "table" and ext.positionEncoding) or "utf-16"
    state.agent_info = result.agentInfo
    state.capabilities = caps
    state.initialized, r.ready = true, true
    local listed = type(result._meta) == "table" and type(result._meta.agentServer) == "table"
      and result._meta.agentServer.availableCommands
    if type(listed) == "table" and vim.islist(listed) then
      emit({ type = "commands", commands = listed })
    end
    finish_start(nil)
  end)
end

--- Make sure a server runs and a session is open. `cb(err)`.
function M.ensure(cb)
  if state.rpc and state.initialized and state.session_id then
    return cb(nil)
  end
  M.ensure_server(function(err)
    if err then
      return cb(err, "start") -- it could not start, or died starting: its log says why
    end
    if state.session_id then
      return cb(nil)
    end
    if state.resumable then
      return M.resume_lost(function(rerr, busy, id)
        if state.session_id then
          return cb(nil)
        elseif busy then -- not sent: the chat offers to take it over (or a copy)
          return cb(string.format("session %s was not resumed: another agent-server process holds it", id),
            "held", id, busy)
        elseif rerr and state.resumable then -- the server did not come up (or died again): still to resume
          return cb(rerr, "start")
        end
        M.new_session(cb)
      end)
    end
    M.new_session(cb)
  end)
end

--- Reattach the session that was open when the server died (`session/resume`: nothing is replayed,
--- the chat still shows it; the server closes a turn the dead process left open). Once: prompts
--- waiting meanwhile share it. `cb(err, busy, id)`: `busy` (from `M.session_busy`) when another
--- agent-server process holds it. When it cannot be resumed the next prompt starts a new session.
function M.resume_lost(cb)
  local id = state.resumable
  if not id or state.session_id then
    return cb(nil)
  end
  if state.resume_waiters then
    state.resume_waiters[#state.resume_waiters + 1] = cb
    return
  end
  state.resume_waiters = { cb }
  local function done(err, busy)
    local waiters = state.resume_waiters or {}
    state.resume_waiters = nil
    for _, w in ipairs(waiters) do
      w(err, busy, id)
    end
  end
  local function lost(reason, busy)
    state.resumable = nil
    emit({ type = "session_lost", id = id, reason = reason, busy = busy })
    done(reason, busy)
  end
  M.ensure_server(function(err)
    if err then
      return done(err)
    end
    if state.resumable ~= id or state.session_id then -- a load or :AgentNew meanwhile
      return done(nil)
    end
    local sc = type(state.capabilities) == "table" and state.capabilities.sessionCapabilities
    if type(sc) ~= "table" or sc.resume == nil then
      return lost("the server cannot resume sessions (no sessionCapabilities.resume)")
    end
    local r = state.rpc
    r:request("session/resume", { sessionId = id, cwd = cwd(), mcpServers = {} }, function(e, result)
      if state.rpc ~= r then
        return done("the server exited while session " .. id .. " was being resumed")
      elseif state.resumable ~= id or state.session_id then
        return done(nil)
      end
      if e then
        return lost(M.error_text(e), M.session_busy(e))
      end
      result = type(result) == "table" and result or {}
      state.session_id, state.resumable = id, nil
      state.modes, state.config_options = result.modes, result.configOptions
      emit({ type = "session", id = id, resumed = true, modes = result.modes, configOptions = result.configOptions })
      done(nil)
    end)
  end)
end

-- Whether error `e` of a request about session `sid` on server `r` says the server no longer has
-- that session (`-32002`: taken over by another agent-server process) while it is still this chat's:
-- then it is not any more, and the next prompt starts a new session unless it is taken back.
local function gone(e, r, sid)
  if type(e) == "table" and e.code == -32002 and state.rpc == r and sid ~= nil and state.session_id == sid then
    state.session_id = nil
    return true
  end
  return false
end

-- What a request on a session that is gone says, in the chat's words (the JSON-RPC error's text is
-- "unknown session: sess_…").
local function gone_text(sid)
  return string.format("session %s is no longer open here: another agent-server process took it over "
    .. "(:AgentSessions loads it again)", tostring(sid))
end

--- Send a prompt (a list of ACP content blocks) in the current session.
---@param blocks table[]
---@param cb fun(err: string|nil, stop_reason: string|nil)|nil
function M.prompt(blocks, cb)
  cb = cb or function() end
  state.turns = state.turns + 1 -- busy from now on, also while the server starts
  M.ensure(function(err, kind, held, busy)
    if err then
      state.turns = math.max(0, state.turns - 1)
      emit({ type = "info", text = "Not sent: " .. err, level = "error" })
      emit({ type = "failed", error = err, kind = kind, prompt = blocks, before_turn = true, session_id = held,
        busy = busy })
      return cb(err)
    end
    local r, sid = state.rpc, state.session_id
    state.session_turns[sid] = (state.session_turns[sid] or 0) + 1
    emit({ type = "turn_start", prompt = blocks, session_id = sid })
    r:request("session/prompt", { sessionId = sid, prompt = blocks }, function(e, result)
      if state.rpc == r then
        state.turns = math.max(0, state.turns - 1)
        state.session_turns[sid] = (state.session_turns[sid] or 1) > 1 and state.session_turns[sid] - 1 or nil
      end
      if e then
        local msg, kind = M.error_text(e), M.error_kind(e)
        if gone(e, r, sid) then
          kind = "gone"
        elseif e.code == -32099 and r.stopping then
          kind = "stopped" -- this Neovim stopped it (`:AgentRestart`, `:AgentSetKey`): not a failure to report
        end
        emit({ type = "turn_end", error = msg, kind = kind, prompt = blocks, session_id = sid })
        emit({ type = "failed", error = msg, kind = kind, prompt = blocks, session_id = sid })
        return cb(msg)
      end
      emit({ type = "turn_end", stop_reason = result.stopReason, prompt = blocks, session_id = sid })
      cb(nil, result.stopReason)
    end)
  end)
end

--- What an error is about, so the chat can offer the way forward: `"auth"` for "Authentication
--- required" (`-32000`) and a prompt the endpoint refused (`data.code` `AUTH`: a 401/403),
--- `"connection"` for an endpoint that cannot be reached (`NETWORK`, `STREAM_IDLE`); else nil.
---@param e table a JSON-RPC error
function M.error_kind(e)
  if type(e) ~= "table" then
    return nil
  end
  local code = type(e.data) == "table" and e.data.code or nil
  if e.code == -32000 or code == "AUTH" then
    return "auth"
  elseif code == "NETWORK" or code == "STREAM_IDLE" then
    return "connection"
  end
end

--- The human text of a JSON-RPC error: its message, and `data.details` only when that says more
--- (agent-server's `details` repeats the message, the TypeScript SDK's convention: shown once).
---@param e table
---@return string
function M.error_text(e)
  local msg = tostring(e.message or "error")
  local details = type(e.data) == "table" and e.data.details or nil
  if type(details) ~= "string" or details == "" or msg:find(details, 1, true) then
    return msg
  end
  if details:find(msg, 1, true) then -- the details say it all, and more
    return details
  end
  return msg .. ": " .. details
end

--- Cancel the running turn of the session open now (`session/cancel`); a turn of a session the chat
--- left runs on.
function M.cancel()
  if state.rpc and state.session_id then
    if not state.session_turns[state.session_id] then
      -- no prompt waits for its answer (the last one ended, or failed at once): no turn end will
      -- come to close a "cancelling …", so none is said
      emit({ type = "cancel", idle = true })
      return true
    end
    state.rpc:notify("session/cancel", { sessionId = state.session_id })
    emit({ type = "cancel", session_id = state.session_id })
    return true
  end
  return false
end

--- Pages of `session/list` followed at most (50 sessions each: 5000 sessions), against a server that
--- never stops sending cursors.
M.MAX_SESSION_PAGES = 100

--- `session/list` for the workspace, every page: follows `nextCursor` until the server sends none,
--- then `cb(err, sessions, note)` once — the sessions in the server's order (newest first), each id
--- once. `note` (else nil) says why the walk stopped before the server said there was no more: a
--- cursor seen before, `M.MAX_SESSION_PAGES` pages, or a later page failing (`sessions` holds the
--- pages before it). A failing first page is `err`.
function M.list_sessions(cb)
  M.ensure_server(function(err)
    if err then
      return cb(err)
    end
    local r = state.rpc -- every page from the same server: a cursor is only good where it was made
    local sessions, ids, cursors, pages = {}, {}, {}, 0
    local function fetch(cursor)
      r:request("session/list", { cwd = cwd(), cursor = cursor }, function(e, result)
        if e then
          if pages == 0 then
            return cb(tostring(e.message))
          end
          return cb(nil, sessions, string.format("session/list page %d failed (%s): showing the first %d sessions",
            pages + 1, M.error_text(e), #sessions))
        end
        pages = pages + 1
        result = type(result) == "table" and result or {}
        for _, s in ipairs(type(result.sessions) == "table" and result.sessions or {}) do
          if type(s) == "table" and s.sessionId ~= nil and not ids[s.sessionId] then
            ids[s.sessionId] = true
            sessions[#sessions + 1] = s
          end
        end
        local next_cursor = result.nextCursor
        if type(next_cursor) ~= "string" or next_cursor == "" then
          return cb(nil, sessions)
        end
        if cursors[next_cursor] then
          return cb(nil, sessions, string.format(
            "session/list: the server sent a cursor again after page %d; showing the %d sessions listed so far",
            pages, #sessions))
        end
        if pages >= M.MAX_SESSION_PAGES then
          return cb(nil, sessions, string.format(
            "session/list: stopped after %d pages (%d sessions); the server still had more", pages, #sessions))
        end
        cursors[next_cursor] = true
        fetch(next_cursor)
      end)
    end
    fetch(nil)
  end)
end

--- What a `SESSION_BUSY` refusal says of the process holding the session (`data.lockedBy`):
--- `{ pid = number|nil, can_take_over = boolean }`; nil for any other error.
---@param e table a JSON-RPC error
function M.session_busy(e)
  local data = type(e) == "table" and type(e.data) == "table" and e.data or nil
  if not data or data.code ~= "SESSION_BUSY" then
    return nil
  end
  local by = type(data.lockedBy) == "table" and data.lockedBy or {}
  return { pid = type(by.pid) == "number" and by.pid or nil, can_take_over = by.answersTakeOver == true }
end

--- `session/load`: the server replays the history (as events) and then answers. `cb(err, busy)`:
--- `busy` (from `M.session_busy`) when another agent-server process holds the session.
--- `opts.take_over`: ask that process to let it go (`_meta.agentServer.takeOver`).
function M.load_session(id, cb, opts)
  cb = cb or function() end
  M.ensure_server(function(err)
    if err then
      return cb(err)
    end
    state.loading = id
    emit({ type = "session", id = id, loading = true })
    local params = { sessionId = id, cwd = cwd(), mcpServers = {} }
    if opts and opts.take_over then
      params._meta = { agentServer = { takeOver = true } }
    end
    state.rpc:request("session/load", params, function(e, result)
      state.loading = nil
      if e then
        -- refused (e.g. open in another agent-server process): the client stays on its session
        local msg = M.error_text(e)
        local busy = M.session_busy(e)
        emit({ type = "session", id = id, refused = msg, busy = busy, current = state.session_id })
        return cb(string.format("could not load session %s: %s", id, msg), busy)
      end
      state.session_id, state.resumable = id, nil
      after_session(result or {})
      emit({ type = "session", id = id, loaded = true, modes = state.modes, configOptions = state.config_options })
      cb(nil)
    end)
  end)
end

--- `session/fork` (ACP unstable): a copy of session `id` with its history up to its last closed
--- turn, leaving whoever holds `id` alone. `cb(err, copy_id)`.
function M.fork_session(id, cb)
  M.ensure_server(function(err)
    if err then
      return cb(err)
    end
    state.rpc:request("session/fork", { sessionId = id, cwd = cwd(), mcpServers = {} }, function(e, result)
      if e then
        return cb(string.format("could not open a copy of session %s: %s", id, M.error_text(e)))
      end
      if type(result) ~= "table" or type(result.sessionId) ~= "string" then
        return cb(string.format("could not open a copy of session %s: the server answered no session id", id))
      end
      cb(nil, result.sessionId)
    end)
  end)
end

--- `session/set_mode`. `cb(err)`.
function M.set_mode(mode, cb)
  cb = cb or function() end
  M.ensure(function(err)
    if err then
      return cb(err)
    end
    local r, sid = state.rpc, state.session_id
    r:request("session/set_mode", { sessionId = sid, modeId = mode }, function(e)
      if gone(e, r, sid) then
        emit({ type = "failed", error = gone_text(sid), kind = "gone", session_id = sid })
        return cb(gone_text(sid))
      elseif e then
        return cb(M.error_text(e))
      end
      if state.modes then
        state.modes.currentModeId = mode
      end
      emit({ type = "info", text = "mode: " .. mode })
      cb(nil)
    end)
  end)
end

--- Switch the model: the `model` config option when the server offers one, else its `/model`
--- command. `cb(err)`.
function M.set_model(model, cb)
  cb = cb or function() end
  M.ensure(function(err)
    if err then
      return cb(err)
    end
    for _, opt in ipairs(state.config_options or {}) do
      if opt.category == "model" or opt.id == "model" then
        local r, sid = state.rpc, state.session_id
        r:request(
          "session/set_config_option",
          { sessionId = sid, configId = opt.id, value = model },
          function(e, result)
            if gone(e, r, sid) then
              emit({ type = "failed", error = gone_text(sid), kind = "gone", session_id = sid })
              return cb(gone_text(sid))
            elseif e then
              return cb(M.error_text(e))
            end
            state.config_options = result.configOptions or state.config_options
            emit({ type = "info", text = "model: " .. model })
            cb(nil)
          end
        )
        return
      end
    end
    M.prompt({ { type = "text", text = "/model " .. model } }, function(e)
      cb(e)
    end)
  end)
end

--- The models the server offers (from a `model` config option), or nil.
function M.models()
  for _, opt in ipairs(state.config_options or {}) do
    if opt.category == "model" or opt.id == "model" then
      return opt.options, opt.currentValue
    end
  end
end

--- Stop the server quietly (no exit report) and start a new one at once; the next prompt runs in a
--- new session, or with `opts.resume` in the session open now (`M.resume_lost`). `cb(err)` once the
--- new server is initialized (or could not start).
function M.restart(cb, opts)
  local had = state.session_id or state.resumable
  M.stop(true)
  state.resumable = opts and opts.resume and had or nil
  M.ensure_server(cb or function() end)
end

--- Stop the server (its whole process group). `wait`: block up to 500 ms (VimLeavePre).
function M.stop(wait)
  local r = state.rpc
  state.rpc, state.session_id, state.initialized = nil, nil, false
  state.last_log = r and r.stderr or state.last_log
  state.turns, state.session_turns = 0, {}
  if r then
    r:stop(wait)
  end
end

--- Whether a turn is running.
function M.busy()
  return state.turns > 0
end

--- What the server wrote on stderr (its log: the last 8 KiB), of the running one or else the last
--- one that ran; "" when none ran.
function M.log()
  return state.rpc and state.rpc.stderr or state.last_log or ""
end

--- The server's command with `login` after it (its `terminal` sign-in, docs/protocol.md), or nil
--- and why not.
function M.login_cmd()
  local cmd, why = config.server_cmd()
  if not cmd then
    return nil, why
  end
  cmd[#cmd + 1] = "login"
  return cmd
end

--- The running server's pid (process group id), or nil.
function M.pid()
  return state.rpc and state.rpc.pid
end

return M
