--- The context a prompt names: `#buffer` (the buffer you worked in last, its unsaved text),
--- `#file:path` (a loaded buffer's text, else the file's), `#selection` (the last visual selection
--- there) and `#diagnostics` (that buffer's diagnostics from every source) become embedded resources
--- (ACP `resource` blocks) sent after the prompt's text, which keeps the words as typed.
---
--- Must never: send a file that is not UTF-8 text (refused with the reason, nothing sent), or take
--- the chat (or another scratch buffer) for "the buffer".
local text = require("agent_server.text")

local M = {}

--- The names offered by completion (`#file:` completes a path).
M.NAMES = { "#buffer", "#file:", "#selection", "#diagnostics" }

--- The buffer the user worked in last: a loaded buffer with a file name and no 'buftype'.
M.last = nil

--- Note that `buf` was entered (BufEnter); only file buffers count.
function M.track(buf)
  if vim.api.nvim_buf_is_valid(buf) and vim.bo[buf].buftype == "" and vim.api.nvim_buf_get_name(buf) ~= "" then
    M.last = buf
  end
end

local function last_buffer()
  if M.last and vim.api.nvim_buf_is_valid(M.last) and vim.api.nvim_buf_is_loaded(M.last) then
    return M.last
  end
  return nil, "#buffer: no file buffer was used yet"
end

local function uri_of(path)
  return vim.uri_from_fname(vim.fn.fnamemodify(path, ":p"))
end

local function resource(uri, body)
  return { type = "resource", resource = { uri = uri, text = body, mimeType = "text/plain" } }
end

local function buffer_block(buf)
  local doc = text.buffer_doc(buf)
  if text.utf8_invalid(doc.text) or (vim.bo[buf].fileencoding ~= "" and vim.bo[buf].fileencoding ~= "utf-8") then
    return nil, vim.api.nvim_buf_get_name(buf) .. " is not UTF-8 text"
  end
  return resource(uri_of(vim.api.nvim_buf_get_name(buf)), doc.text)
end

local function file_block(path, cwd)
  if path == "" then
    return nil, "#file: needs a path (#file:src/app.py)"
  end
  local full = vim.fn.fnamemodify(path:sub(1, 1) == "/" and path or (cwd .. "/" .. path), ":p")
  local buf = require("agent_server.buffers").find(full)
  if buf then
    return buffer_block(buf)
  end
  local raw = require("agent_server.buffers").read_disk(full)
  if not raw then
    return nil, "#file:" .. path .. ": no such file"
  end
  if text.utf8_invalid(raw) then
    return nil, "#file:" .. path .. " is not UTF-8 text"
  end
  return resource(uri_of(full), text.from_raw(raw).text)
end

local function selection_block()
  local buf, err = last_buffer()
  if not buf then
    return nil, err
  end
  local s, e = vim.api.nvim_buf_get_mark(buf, "<"), vim.api.nvim_buf_get_mark(buf, ">")
  if s[1] == 0 or e[1] == 0 then
    return nil, "#selection: " .. vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":~:.") .. " has no selection"
  end
  local mode = vim.fn.visualmode()
  return require("agent_server.selection").block(buf, { line1 = s[1], line2 = e[1], visual = mode ~= "" and mode or nil })
end

local SEVERITY = { "ERROR", "WARN", "INFO", "HINT" }

local function diagnostics_block()
  local buf, err = last_buffer()
  if not buf then
    return nil, err
  end
  local name = vim.fn.fnamemodify(vim.api.nvim_buf_get_name(buf), ":p")
  local lines = {}
  local list = vim.diagnostic.get(buf)
  table.sort(list, function(a, b)
    return a.lnum < b.lnum or (a.lnum == b.lnum and a.col < b.col)
  end)
  for _, d in ipairs(list) do
    lines[#lines + 1] = string.format("%s:%d:%d: %s: %s%s", vim.fn.fnamemodify(name, ":~:."), d.lnum + 1, d.col + 1,
      SEVERITY[d.severity] or "?", tostring(d.message):gsub("\n", " "), d.source and (" [" .. d.source .. "]") or "")
  end
  if #lines == 0 then
    lines[1] = "no diagnostics"
  end
  return resource(uri_of(name) .. "#diagnostics", table.concat(lines, "\n"))
end

-- The path of a `#file:` reference: as typed, or without trailing punctuation when only that
-- names a file ("see #file:a.py.").
local function file_arg(arg, cwd)
  local function exists(p)
    local full = p:sub(1, 1) == "/" and p or (cwd .. "/" .. p)
    return vim.uv.fs_stat(full) ~= nil
  end
  if exists(arg) then
    return arg
  end
  local trimmed = arg:gsub("[%.,;:!?%)%]]+$", "")
  return exists(trimmed) and trimmed or arg
end

local GIVERS = { buffer = true, selection = true, diagnostics = true }

--- The resource blocks `prompt` names, in the order first named (each once); nil and the reason
--- when one cannot be given. `cwd`: where a relative `#file:` path starts. A name counts at the
--- start of a word (`#buffer`, `#buffer,`), never inside one (`a#buffer`).
---@return table[]|nil blocks, string|nil err
function M.blocks(prompt, cwd)
  local out, seen = {}, {}
  for pos, word in prompt:gmatch("()#(%S+)") do
    if pos == 1 or prompt:sub(pos - 1, pos - 1):match("%s") then
      local name, rest = word:match("^(%a+)(.*)$")
      local block, err, key
      if name == "file" and rest:sub(1, 1) == ":" then
        local path = file_arg(rest:sub(2), cwd)
        key = "file:" .. path
        if not seen[key] then
          block, err = file_block(path, cwd)
        end
      elseif name and GIVERS[name] and not rest:match("^[%w_:]") then
        key = name
        if not seen[key] then
          if name == "buffer" then
            local buf, why = last_buffer()
            if buf then
              block, err = buffer_block(buf)
            else
              err = why
            end
          elseif name == "selection" then
            block, err = selection_block()
          else
            block, err = diagnostics_block()
          end
        end
      end
      if err then
        return nil, err
      end
      if block then
        seen[key] = true
        out[#out + 1] = block
      end
    end
  end
  return out
end

return M
