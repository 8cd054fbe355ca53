--- The agent's view of files: `fs/read_text_file` and `fs/write_text_file` from loaded buffers.
---
--- Role: a file loaded in a buffer is answered from the buffer (its unsaved text, its version
--- `b:changedtick`, whether it is dirty); a clean buffer whose file changed on disk is reloaded
--- first. Other files come from (and go to) the disk. A write to a loaded buffer changes the
--- buffer and saves it only if it had no unsaved changes.
---
--- Must never: write the user's unsaved text to disk behind their back, or decide anything about
--- proposals (that is `proposals`).
local text = require("agent_server.text")

local M = {}

local uv = vim.uv or vim.loop

--- Absolute, normalised form of a path (symlinks resolved when the file exists).
function M.normalize(path)
  local abs = vim.fn.fnamemodify(path, ":p")
  return uv.fs_realpath(abs) or vim.fs.normalize(abs)
end

--- The loaded buffer holding `path`, or nil.
---@return integer|nil
function M.find(path)
  local want = M.normalize(path)
  for _, b in ipairs(vim.api.nvim_list_bufs()) do
    if vim.api.nvim_buf_is_loaded(b) and vim.bo[b].buftype == "" then
      local name = vim.api.nvim_buf_get_name(b)
      if name ~= "" and (name == path or M.normalize(name) == want) then
        return b
      end
    end
  end
end

--- Raw bytes of a file, or nil and the error.
function M.read_disk(path)
  local fh, err = io.open(path, "rb")
  if not fh then
    return nil, err
  end
  local data = fh:read("*a")
  fh:close()
  return data
end

--- Write raw bytes to a file (parent folders created).
---@return boolean ok, string|nil err
function M.write_disk(path, data)
  vim.fn.mkdir(vim.fs.dirname(path), "p")
  local fh, err = io.open(path, "wb")
  if not fh then
    return false, err
  end
  local ok, werr = fh:write(data)
  fh:close()
  if not ok then
    return false, werr
  end
  return true
end

--- Save a loaded buffer to its file.
function M.save(buf)
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd("silent keepalt keepjumps write!")
  end)
  return ok and not vim.bo[buf].modified, err
end

--- Reload a clean buffer whose file on disk no longer holds the buffer's text.
local function refresh_clean(buf, path)
  if vim.bo[buf].modified then
    return
  end
  local raw = M.read_disk(path)
  if not raw then
    return
  end
  local doc = text.buffer_doc(buf)
  if text.wire(doc.text, doc.eol) == raw then
    return
  end
  text.set_buffer_text(buf, text.canon(raw))
  vim.bo[buf].modified = false
end

--- The document the agent should see for `path`: `{ wire, version, dirty, buf }` where `wire` is the
--- text with the file's own line breaks; nil and an error when the file cannot be read.
function M.snapshot(path)
  local buf = M.find(path)
  if buf then
    refresh_clean(buf, path)
    local doc = text.buffer_doc(buf)
    return {
      wire = text.wire(doc.text, doc.eol),
      text = doc.text,
      eol = doc.eol,
      version = vim.b[buf].changedtick,
      dirty = vim.bo[buf].modified,
      buf = buf,
    }
  end
  local raw, err = M.read_disk(path)
  if not raw then
    return nil, err
  end
  return { wire = raw, text = text.canon(raw), eol = text.detect_eol(raw), version = nil, dirty = false }
end

local function slice(content, line, limit)
  if not line and not limit then
    return content
  end
  local lines = vim.split(content, "\n", { plain = true })
  local first = math.max(1, line or 1)
  local last = limit and (first + limit - 1) or #lines
  return table.concat(vim.list_slice(lines, first, last), "\n")
end

--- Answer `fs/read_text_file` params `{ path, line?, limit? }`.
---@return table|nil result, table|nil jsonrpc_error
function M.read_text_file(params)
  local path = params.path
  if type(path) ~= "string" or path == "" then
    return nil, { code = -32602, message = "fs/read_text_file needs a path" }
  end
  local snap, err = M.snapshot(path)
  if not snap then
    return nil, { code = -32002, message = "cannot read " .. path .. ": " .. tostring(err), data = { path = path } }
  end
  return {
    content = slice(snap.wire, params.line, params.limit),
    _meta = { agentServer = { version = snap.version or vim.NIL, dirty = snap.dirty } },
  }
end

--- Answer `fs/write_text_file` params `{ path, content }`: through the loaded buffer (saved only if
--- it had no unsaved changes), else to disk.
---@return table|nil result, table|nil jsonrpc_error
function M.write_text_file(params)
  local path, content = params.path, params.content
  if type(path) ~= "string" or type(content) ~= "string" then
    return nil, { code = -32602, message = "fs/write_text_file needs a path and content" }
  end
  local buf = M.find(path)
  if buf then
    local was_dirty = vim.bo[buf].modified
    text.set_buffer_text(buf, text.canon(content))
    if not was_dirty then
      local ok, err = M.save(buf)
      if not ok then
        return nil, { code = -32603, message = "cannot save " .. path .. ": " .. tostring(err) }
      end
    end
    return vim.empty_dict()
  end
  local ok, err = M.write_disk(path, content)
  if not ok then
    return nil, { code = -32603, message = "cannot write " .. path .. ": " .. tostring(err) }
  end
  return vim.empty_dict()
end

return M
