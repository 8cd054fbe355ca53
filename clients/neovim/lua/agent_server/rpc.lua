--- NDJSON JSON-RPC 2.0 over a child process's stdio.
---
--- Role: spawn the server in its own process group (`vim.uv.spawn`, detached), frame lines
--- (partial lines are kept until their newline), route responses to their callbacks, hand
--- notifications and the server's requests to the handlers given at start, and kill the whole
--- process group on `stop()`. Reading never blocks the UI: lines are queued in the libuv
--- callback and decoded on the main loop in slices of a few milliseconds.
---
--- Must never: know any ACP method, die on a line that is not a JSON object (it is skipped and
--- logged), leave a process behind after `stop()`, send a line that is not UTF-8 JSON, or leave a
--- request of the server unanswered: a handler that raises, or an answer that cannot be encoded
--- or is not UTF-8 (text of a latin1 buffer), is answered with a JSON-RPC error instead.
local uv = vim.uv or vim.loop
local utf8 = require("agent_server.utf8")

local M = {}

--- When set, `trace(direction, line)` sees every line sent ("->") and received ("<-").
---@type fun(direction: string, line: string)|nil
M.trace = nil

---@class agent_server.Rpc
---@field pid integer
---@field alive boolean
local Rpc = {}
Rpc.__index = Rpc

local STDERR_KEEP = 8192
local SLICE_MS = 8

local function now_ms()
  return uv.hrtime() / 1e6
end

local function env_list(extra)
  local env = vim.fn.environ()
  for k, v in pairs(extra or {}) do
    env[k] = tostring(v)
  end
  local out = {}
  for k, v in pairs(env) do
    out[#out + 1] = k .. "=" .. v
  end
  return out
end

--- Start a server process.
---@param opts table { cmd: string[], env: table|nil, cwd: string|nil,
---   on_request: fun(rpc, req: {id, method, params, reply: fun(result, err), on_cancel: fun()|nil}),
---   on_notification: fun(rpc, method: string, params: table|nil),
---   on_exit: fun(rpc, code: integer, signal: integer, stderr_tail: string),
---   on_bad_line: fun(rpc, line: string)|nil }
---@return agent_server.Rpc|nil rpc, string|nil error
function M.start(opts)
  local self = setmetatable({
    opts = opts,
    next_id = 1,
    pending = {}, -- id -> callback(err, result)
    incoming = {}, -- id(string) -> open request of the server
    queue = {},
    draining = false,
    partial = {},
    stderr = "",
    alive = true,
    bad_lines = {},
  }, Rpc)
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local handle, pid_or_err = uv.spawn(opts.cmd[1], {
    args = vim.list_slice(opts.cmd, 2),
    stdio = { stdin, stdout, stderr },
    env = env_list(opts.env),
    cwd = opts.cwd,
    detached = true, -- setsid(): its own process group, killed as a whole
  }, function(code, signal)
    self:_exited(code, signal)
  end)
  if not handle then
    for _, p in ipairs({ stdin, stdout, stderr }) do
      p:close()
    end
    return nil, string.format("cannot start %s: %s", opts.cmd[1], tostring(pid_or_err))
  end
  self.handle, self.pid = handle, pid_or_err
  self.stdin, self.stdout, self.stderr_pipe = stdin, stdout, stderr
  stdout:read_start(function(err, data)
    if data then
      self:_on_stdout(data)
    else
      self.stdout_eof = true
      self:_stream_lost(err and ("reading its output failed: " .. tostring(err)) or "its output closed")
    end
  end)
  stderr:read_start(function(_, data)
    if data then
      self.stderr = (self.stderr .. data):sub(-STDERR_KEEP)
      if self.opts.on_stderr then
        self.opts.on_stderr(data)
      end
    end
  end)
  return self
end

--- The output stream ended or failed and, 300 ms later, the process still runs: nothing more can
--- be read from it, so it is stopped (SIGTERM to its group, SIGKILL after 1 s) and its exit reported
--- with `stream_lost` — why — for the next command to start a new server (as after a crash).
function Rpc:_stream_lost(why)
  vim.defer_fn(function() -- a process that exits closes its output first: give its exit a moment
    if not self.alive or self.stopping or self.finished then
      return
    end
    self.stream_lost = why
    self:_kill_group("sigterm")
    vim.defer_fn(function()
      if not self.finished then
        self:_kill_group("sigkill")
      end
    end, 1000)
  end, 300)
end

function Rpc:_on_stdout(data)
  local start = 1
  while true do
    local nl = data:find("\n", start, true)
    if not nl then
      if start <= #data then
        self.partial[#self.partial + 1] = data:sub(start)
      end
      break
    end
    local piece = data:sub(start, nl - 1)
    if #self.partial > 0 then
      self.partial[#self.partial + 1] = piece
      piece = table.concat(self.partial)
      self.partial = {}
    end
    self.queue[#self.queue + 1] = piece
    start = nl + 1
  end
  self:_schedule_drain()
end

function Rpc:_schedule_drain()
  if not self.draining then
    self.draining = true
    vim.schedule(function()
      self:_drain()
    end)
  end
end

-- Decode and dispatch queued lines for at most SLICE_MS, then yield to the main loop (typing,
-- redraws, RPC from other clients) and go on.
function Rpc:_drain()
  local deadline = now_ms() + SLICE_MS
  local i = 1
  local q = self.queue
  while i <= #q do
    local line = q[i]
    i = i + 1
    self:_dispatch_line(line)
    if now_ms() > deadline then
      break
    end
  end
  if i > #q then
    self.queue = {}
    self.draining = false
    if self.exit_pending then
      local e = self.exit_pending
      self.exit_pending = nil
      self:_finish_exit(e.code, e.signal)
    end
  else
    self.queue = vim.list_slice(q, i)
    vim.schedule(function()
      self:_drain()
    end)
  end
end

function Rpc:_dispatch_line(line)
  line = line:gsub("\r$", "")
  if M.trace then
    M.trace("<-", line)
  end
  if line:match("^%s*$") then
    return
  end
  local ok, msg = pcall(vim.json.decode, line, { luanil = { object = true, array = true } })
  if not ok or type(msg) ~= "table" or vim.islist(msg) and #msg > 0 then
    self.bad_lines[#self.bad_lines + 1] = line:sub(1, 200)
    if #self.bad_lines > 20 then
      table.remove(self.bad_lines, 1)
    end
    if self.opts.on_bad_line then
      self.opts.on_bad_line(self, line)
    end
    return
  end
  if msg.method ~= nil and msg.id ~= nil then
    self:_on_request(msg)
  elseif msg.method ~= nil then
    if msg.method == "$/cancel_request" and type(msg.params) == "table" then
      local req = self.incoming[tostring(msg.params.requestId)]
      if req and req.on_cancel then
        req.on_cancel()
      end
      return
    end
    self.opts.on_notification(self, msg.method, msg.params)
  elseif msg.id ~= nil then
    local cb = self.pending[msg.id]
    self.pending[msg.id] = nil
    if cb then
      cb(msg.error, msg.result)
    end
  end
end

function Rpc:_on_request(msg)
  local key = tostring(msg.id)
  local req = { id = msg.id, method = msg.method, params = msg.params or {} }
  local answered = false
  function req.reply(result, err)
    if answered then
      return
    end
    answered = true
    self.incoming[key] = nil
    local answer = err and { jsonrpc = "2.0", id = msg.id, error = err }
      or { jsonrpc = "2.0", id = msg.id, result = result == nil and vim.empty_dict() or result }
    local ok, why = self:_write(answer)
    if not ok and why then
      self:_write({ jsonrpc = "2.0", id = msg.id, error = { code = -32603, message = "client error: " .. why } })
    end
  end
  function req.answered()
    return answered
  end
  self.incoming[key] = req
  local ok, err = pcall(self.opts.on_request, self, req)
  if not ok then
    req.reply(nil, { code = -32603, message = "client error: " .. tostring(err) })
  end
end

--- Send one message. Returns true, or false and why when it could not be encoded as UTF-8 JSON
--- (nothing is sent then), or just false when the process is gone.
function Rpc:_write(msg)
  if not self.alive or self.stdin:is_closing() then
    return false
  end
  local ok, line = pcall(vim.json.encode, msg)
  if not ok then
    return false, "the message cannot be encoded as JSON: " .. tostring(line)
  end
  local count, first = utf8.invalid(line)
  if count then
    return false, string.format("the message is not UTF-8 (%d invalid bytes, first at byte %d of the line)", count, first)
  end
  if M.trace then
    M.trace("->", line)
  end
  self.stdin:write(line .. "\n")
  return true
end

--- Send a request; `callback(err, result)` runs on the main loop (err: a JSON-RPC error table,
--- also when the process died before answering).
---@return integer id
function Rpc:request(method, params, callback)
  local id = self.next_id
  self.next_id = id + 1
  self.pending[id] = callback or function() end
  local ok, why = self:_write({ jsonrpc = "2.0", id = id, method = method, params = params or vim.empty_dict() })
  if not ok then
    self.pending[id] = nil
    vim.schedule(function()
      (callback or function() end)({ code = why and -32603 or -32099, message = why or "the server is not running" })
    end)
  end
  return id
end

--- Send a notification.
function Rpc:notify(method, params)
  return self:_write({ jsonrpc = "2.0", method = method, params = params or vim.empty_dict() })
end

--- The last bytes the server wrote to stderr.
---@param max integer|nil characters (default 2000)
function Rpc:stderr_tail(max)
  return self.stderr:sub(-(max or 2000))
end

function Rpc:_exited(code, signal)
  vim.schedule(function()
    self.alive = false
    if self.draining then
      self.exit_pending = { code = code, signal = signal }
    else
      self:_finish_exit(code, signal)
    end
  end)
end

function Rpc:_finish_exit(code, signal)
  if self.finished then
    return
  end
  self.finished = true
  self:_kill_group("sigkill") -- commands it left running
  for _, p in ipairs({ self.stdin, self.stdout, self.stderr_pipe }) do
    if not p:is_closing() then
      p:close()
    end
  end
  if not self.handle:is_closing() then
    self.handle:close()
  end
  if self.opts.on_exit then
    self.opts.on_exit(self, code, signal, self:stderr_tail())
  end
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do
    cb({ code = -32099, message = "the server exited" })
  end
  for _, req in pairs(self.incoming) do
    if req.on_cancel then
      pcall(req.on_cancel)
    end
  end
  self.incoming = {}
end

function Rpc:_kill_group(sig)
  if self.pid then
    pcall(uv.kill, -self.pid, sig)
  end
end

--- Stop the server: close its stdin, SIGTERM its process group, and (when `wait` is true, as on
--- VimLeavePre) wait up to 3 s for it to exit — it stops the commands it started, which live in
--- their own process groups — before SIGKILL to the whole group.
---@param wait boolean|nil
function Rpc:stop(wait)
  self.stopping = true
  if self.stdin and not self.stdin:is_closing() then
    self.stdin:close()
  end
  if not self.alive then
    return
  end
  self:_kill_group("sigterm")
  if wait then
    vim.wait(3000, function()
      return self.handle:is_closing() or not uv.is_active(self.handle) or self.finished
    end, 10)
  end
  self:_kill_group("sigkill")
end

return M
