--- The agent's view of files: `fs/read_text_file` and `fs/write_text_file` from loaded buffers.
---
--- Role: a file loaded in a buffer is answered from the buffer (its unsaved text, its version
--- `b:changedtick`, whether it is dirty); a clean buffer whose file changed on disk is reloaded
--- first, by Neovim itself (`:edit!`, as 'autoread' would). Other files come from (and go to) the
--- disk. The text is `text`'s (no BOM; the file's line breaks; a final one as 'eol' says); a
--- write to a file with a BOM keeps it. A write to a loaded buffer changes the buffer and saves it
--- only if it had no unsaved changes, with exactly the text's final newline. After `/undo` put back
--- on disk exactly what a buffer's unsaved text started from, Neovim's record of the file is renewed.
---
--- A document that is not UTF-8 — a buffer whose 'fileencoding' is another, a buffer or a file
--- holding bytes that are not UTF-8 — is refused with a JSON-RPC error (`data.agentServer.notUtf8`,
--- docs/protocol.md "Files that are not UTF-8"), never sent as text nor written.
---
--- Must never: write the user's unsaved text to disk behind their back, or decide anything about
--- proposals (that is `proposals`), reload a buffer from bytes that are not UTF-8, or modify a
--- buffer, or change its options, by reading it.
local text = require("agent_server.text")

local M = {}

local uv = vim.uv or vim.loop

--- Absolute, normalised form of a path (symlinks resolved when the file exists).
function M.normalize(path)
  local abs = vim.fn.fnamemodify(path, ":p")
  return uv.fs_realpath(abs) or vim.fs.normalize(abs)
end

--- The real path of `path`: symlinks resolved; for a path that does not exist (yet), its nearest
--- existing folder's real path joined with the rest.
function M.real_path(path)
  local p = vim.fs.normalize(vim.fn.fnamemodify(path, ":p"))
  local rest = {}
  while true do
    local real = uv.fs_realpath(p)
    if real then
      return #rest == 0 and real or (real:gsub("/$", "") .. "/" .. table.concat(rest, "/"))
    end
    local parent = vim.fs.dirname(p)
    if parent == p then
      return vim.fs.normalize(vim.fn.fnamemodify(path, ":p"))
    end
    table.insert(rest, 1, vim.fs.basename(p))
    p = parent
  end
end

--- The workspace folder: the session's (`config.cwd`, else Neovim's current folder).
function M.workspace()
  return require("agent_server.config").get().cwd or vim.fn.getcwd()
end

local function under(path, root)
  root = root:gsub("/$", "")
  return path == root or path:sub(1, #root + 1) == root .. "/"
end

--- Why writing `path` now would land outside the workspace folder, or nil: its real path (`real_path`)
--- is not under the folder's real path. Checked right before a write (finding 20: a folder swapped
--- for a link while a proposal waited carried the file outside).
function M.leads_outside(path)
  local real = M.real_path(path)
  if under(real, M.real_path(M.workspace())) then
    return nil
  end
  return string.format("%s: the path now leads outside the workspace (to %s: a link was swapped into it)",
    vim.fn.fnamemodify(path, ":~:."), real)
end

--- Why writing `path` now would land elsewhere than `real`, its real path when the proposal came, or
--- nil: a link swapped into it while the proposal waited (a folder made a link to `.git/hooks`)
--- carries the write to another file — inside the workspace too — than the one the user reviewed.
function M.moved_since(path, real)
  if not real then
    return nil
  end
  local now = M.real_path(path)
  if now == real then
    return nil
  end
  return string.format("%s: the path now leads to %s, not to %s where it led when the change was proposed "
    .. "(a link was swapped into it)", vim.fn.fnamemodify(path, ":~:."), now, real)
end

--- Whether `path` lies under the workspace folder as written (links not resolved).
function M.lexically_inside(path)
  return under(vim.fs.normalize(vim.fn.fnamemodify(path, ":p")), vim.fs.normalize(vim.fn.fnamemodify(M.workspace(), ":p")))
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

--- Save a loaded buffer to its file, as its text says: a buffer without a final newline ('noeol')
--- is written without one even when 'fixeol' is on ('fixeol' is off for this write only).
function M.save(buf)
  local fix = vim.bo[buf].fixeol
  if fix and not vim.bo[buf].eol then
    vim.bo[buf].fixeol = false
  end
  local ok, err = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd("silent keepalt keepjumps write!")
  end)
  if vim.api.nvim_buf_is_valid(buf) then
    vim.bo[buf].fixeol = fix
  end
  return ok and not vim.bo[buf].modified, err
end

--- After the user's `:w` of a 'noeol' buffer with 'fixeol' on, the file ends with a line break:
--- 'eol' says so from then on, so the buffer's text stays the file's (BufWritePost).
function M.after_write(buf)
  local bo = vim.bo[buf]
  if not bo.eol and bo.fixeol and not bo.binary and bo.buftype == "" then
    bo.eol = true
  end
end

--- Files up to this size are hashed when their buffer reads or writes them (`M.note_disk`).
local NOTE_LIMIT = 4 * 1024 * 1024

--- Note what the file of `buf` holds as the buffer reads or writes it (`b:agent_server_disk`, its
--- sha256; none for a file over `NOTE_LIMIT`): `M.adopt_disk` tells from it that a restore put back
--- exactly what the buffer's unsaved text started from.
function M.note_disk(buf)
  if not vim.api.nvim_buf_is_loaded(buf) or vim.bo[buf].buftype ~= "" then
    return
  end
  local path = vim.api.nvim_buf_get_name(buf)
  local st = path ~= "" and uv.fs_stat(path)
  local raw = st and st.type == "file" and st.size <= NOTE_LIMIT and M.read_disk(path)
  vim.b[buf].agent_server_disk = raw and text.sha256(raw) or nil
end

--- After `/undo` or `/redo` wrote `path` on disk under its buffer's unsaved text: where the disk holds
--- again exactly what the buffer was read from or last saved as, Neovim's record of the file is made
--- current — `:edit!` ('undoreload' keeping the reload for undo, whatever the file's length), then the
--- unsaved text back (by undo, the undo history with it; else set again), its 'eol', 'fileformat' and 'bomb' too — so that `:w` writes the
--- unsaved text without "The file has been changed since reading it". Any other disk: left to Neovim's
--- own warning (someone else's bytes would be written over).
function M.adopt_disk(path)
  local buf = M.find(path)
  if not buf or not vim.bo[buf].modified or vim.b[buf].agent_server_disk == nil then
    return false
  end
  local raw = M.read_disk(path)
  if not raw or text.sha256(raw) ~= vim.b[buf].agent_server_disk or text.utf8_invalid(raw) then
    return false
  end
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local bo = vim.bo[buf]
  local opts = { eol = bo.eol, fileformat = bo.fileformat, bomb = bo.bomb }
  local views = {}
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    views[win] = vim.api.nvim_win_call(win, vim.fn.winsaveview)
  end
  local seq = vim.fn.undotree(buf).seq_last
  -- the reload saved for undo whatever the file's length ('undoreload' negative): past its default
  -- 10,000 lines `:edit!` would wipe the undo history, the user's edits with it
  local undoreload = vim.o.undoreload
  vim.o.undoreload = -1
  local ok = pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd("silent keepalt keepjumps edit!")
  end)
  vim.o.undoreload = undoreload
  if not ok then
    return false
  end
  if not vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), lines) then
    if vim.fn.undotree(buf).seq_last > seq then -- 'undoreload' kept the text before the reload
      pcall(vim.api.nvim_buf_call, buf, function()
        vim.cmd("silent undo")
      end)
    end
    if not vim.deep_equal(vim.api.nvim_buf_get_lines(buf, 0, -1, false), lines) then
      vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
    end
  end
  for name, value in pairs(opts) do
    if bo[name] ~= value then
      bo[name] = value
    end
  end
  for win, view in pairs(views) do
    pcall(vim.api.nvim_win_call, win, function()
      vim.fn.winrestview(view)
    end)
  end
  return true
end

--- The JSON-RPC error for `path` when it is not UTF-8 text: `encoding` is the buffer's
--- 'fileencoding' (nil for bytes on disk), `raw` the bytes that are not UTF-8 (nil when the encoding
--- alone says so).
function M.not_utf8_error(path, encoding, raw)
  local detail
  if raw then
    local count, first = text.utf8_invalid(raw)
    detail = string.format("%d invalid byte%s, first at offset %d", count, count == 1 and "" or "s", first)
  else
    detail = "the buffer's 'fileencoding' is " .. encoding
  end
  return {
    code = -32603,
    message = path .. " is not UTF-8 text (" .. detail .. ")",
    data = { agentServer = { notUtf8 = true, encoding = encoding or vim.NIL }, path = path },
  }
end

--- The not-UTF-8 error for loaded buffer `buf` of `path`, or nil: its 'fileencoding' (Neovim keeps
--- the text as UTF-8 and converts it on writing), bytes in its lines that are not UTF-8, or — when
--- 'fileencoding' is empty, as after a conversion error (Neovim then shows each bad byte as "?") —
--- a file on disk whose bytes are not UTF-8.
function M.buffer_encoding_error(buf, path)
  local fenc = vim.bo[buf].fileencoding
  if fenc ~= "" and fenc ~= "utf-8" then
    return M.not_utf8_error(path, fenc)
  end
  local doc = text.buffer_doc(buf)
  if text.utf8_invalid(doc.text) then
    return M.not_utf8_error(path, fenc ~= "" and fenc or nil, doc.text)
  end
  if fenc == "" then
    local raw = M.read_disk(path)
    if raw and text.utf8_invalid(raw) then
      return M.not_utf8_error(path, nil, raw)
    end
  end
end

--- Reload a clean buffer whose file on disk no longer holds the buffer's text — neither as it was
--- read nor as `:w` writes it — with Neovim's own reader (`:edit!`: BOM, 'fileformat' and 'eol'
--- detected as for any file; undo kept per 'undoreload'); not from bytes that are not UTF-8 (the
--- buffer keeps what it had, and the read is refused by the caller).
local function refresh_clean(buf, path)
  if vim.bo[buf].modified then
    return
  end
  local raw = M.read_disk(path)
  if not raw or text.utf8_invalid(raw) then
    return
  end
  if raw == text.buffer_bytes(buf, false) or raw == text.buffer_bytes(buf, true) then
    return
  end
  pcall(vim.api.nvim_buf_call, buf, function()
    vim.cmd("silent keepalt keepjumps edit!")
  end)
end

--- The document the agent should see for `path`: `{ wire, version, dirty, buf }` where `wire` is the
--- text with the file's own line breaks; nil and an error when the file cannot be read (a string),
--- or is not UTF-8 text (the JSON-RPC error table, `M.not_utf8_error`).
function M.snapshot(path)
  local buf = M.find(path)
  if buf then
    local bad = M.buffer_encoding_error(buf, path)
    if bad then
      return nil, bad
    end
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
  if text.utf8_invalid(raw) then
    return nil, M.not_utf8_error(path, nil, raw)
  end
  local doc = text.from_raw(raw)
  return { wire = doc.body, text = doc.text, eol = doc.eol, bom = doc.bom, version = nil, dirty = false }
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
  if not snap and type(err) == "table" then
    return nil, err
  end
  if not snap then
    return nil, { code = -32002, message = "cannot read " .. path .. ": " .. tostring(err), data = { path = path } }
  end
  return {
    content = slice(snap.wire, params.line, params.limit),
    _meta = { agentServer = { version = snap.version or vim.NIL, dirty = snap.dirty } },
  }
end

--- The stale error for a guarded `fs/write_text_file` (`_meta.agentServer {version, sha256}`: the
--- document the agent read, docs/protocol.md) whose document moved on since — the proposal's stale
--- rule: its version differs and so does the sha256 of its text —, or nil.
local function write_guard_error(params, buf)
  local meta = type(params._meta) == "table" and params._meta.agentServer or nil
  if type(meta) ~= "table" or type(meta.sha256) ~= "string" then
    return nil
  end
  local wire
  if buf then
    if type(meta.version) == "number" and vim.b[buf].changedtick == meta.version then
      return nil
    end
    local doc = text.buffer_doc(buf)
    wire = text.wire(doc.text, doc.eol)
  else
    local raw = M.read_disk(params.path)
    wire = raw and (raw:sub(1, 3) == text.BOM and raw:sub(4) or raw) or nil
  end
  if wire ~= nil and text.sha256(wire) == meta.sha256 then
    return nil
  end
  local where = buf and "changed in the editor" -- say which is true (the server tells the model)
    or (wire == nil and "was deleted on disk" or "changed on disk")
  return {
    code = -32603,
    message = params.path .. " " .. where .. " since the agent read it; nothing was written",
    data = { agentServer = { stale = true }, path = params.path },
  }
end

--- Answer `fs/write_text_file` params `{ path, content }`: through the loaded buffer (saved only if
--- it had no unsaved changes), else to disk; refused as stale when `_meta.agentServer` names a
--- document the buffer no longer holds (`write_guard_error`).
---@return table|nil result, table|nil jsonrpc_error
function M.write_text_file(params)
  local path, content = params.path, params.content
  if type(path) ~= "string" or type(content) ~= "string" then
    return nil, { code = -32602, message = "fs/write_text_file needs a path and content" }
  end
  local buf = M.find(path)
  local bad = buf and M.buffer_encoding_error(buf, path)
  if bad then
    return nil, bad
  end
  local moved = write_guard_error(params, buf)
  if moved then
    return nil, moved
  end
  local outside = M.lexically_inside(path) and (not buf or not vim.bo[buf].modified) and M.leads_outside(path)
  if outside then
    return nil, { code = -32603, message = outside .. "; nothing was written",
      data = { agentServer = { stale = true }, path = path } }
  end
  if buf then
    local was_dirty = vim.bo[buf].modified
    text.set_buffer_text(buf, text.to_doc(content, text.buffer_doc(buf).eol))
    if not was_dirty then
      local ok, err = M.save(buf)
      if not ok then
        return nil, { code = -32603, message = "cannot save " .. path .. ": " .. tostring(err) }
      end
    end
    return vim.empty_dict()
  end
  local old = M.read_disk(path)
  if old and old:sub(1, 3) == text.BOM and content:sub(1, 3) ~= text.BOM then
    content = text.BOM .. content -- the BOM is the file's, not the text's: kept
  end
  local ok, err = M.write_disk(path, content)
  if not ok then
    return nil, { code = -32603, message = "cannot write " .. path .. ": " .. tostring(err) }
  end
  return vim.empty_dict()
end

return M
