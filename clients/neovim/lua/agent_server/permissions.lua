--- `session/request_permission`: show the question (the tool call, the reason, the diff of an
--- edit) and its options with `vim.ui.select`, and answer with the chosen option. Neovim's own
--- `vim.ui.select` is `inputlist()`, modal (nothing else can be looked at while it waits): with it
--- the question waits in the chat, its options numbered, answered by `:AgentAnswer N` (or
--- `:AgentAnswer` for the picker, when the user chooses to open it).
---
--- Must never: allow on silence, on a dismissed picker, on an error or when the turn is cancelled —
--- all of those answer `cancelled`, which the server treats as a denial.
local M = {}

--- Hooks set by the plugin: `asked(params, lines)` draws the question (`lines`: `M.describe`) in
--- the chat, under the tool call it is about, and returns its handle; `answered(handle, text)`
--- draws its outcome under it; `place(handle)` says where it stands in the chat (rows compare: a
--- question above another has a smaller place; nil: not drawn); `reveal()` shows the chat (without
--- focusing it) and redraws the screen, so the question is on screen before the picker opens (the
--- default `vim.ui.select` is `inputlist()`, which draws nothing else while it waits). A hook that
--- fails never answers.
--- A question of a session the chat left (its turn went on after the user loaded or started another)
--- is drawn in that session's part of the chat (`asked`); when that session is loaded again, the
--- questions it still waits for are drawn in its transcript again (`M.session_shown`).
M.hooks = { asked = function() end, answered = function() end, place = function() end, reveal = function() end }

local open = {}
local asked = 0

-- Whether `vim.ui.select` is Neovim's own (`inputlist()`, modal), not a picker a plugin installed.
local function modal_select()
  local ok, info = pcall(debug.getinfo, vim.ui.select, "S")
  return ok and type(info) == "table" and type(info.source) == "string"
    and info.source:match("vim[/\\]ui%.lua$") ~= nil
end

--- The line under a question waiting in the chat: its options, numbered, and how to answer.
function M.options_line(options)
  local parts = {}
  for i, o in ipairs(options) do
    parts[#parts + 1] = string.format("%d %s", i, o.name or o.optionId)
  end
  return "Answer with :AgentAnswer N — " .. table.concat(parts, " · ") .. " (:AgentAnswer alone opens a picker)"
end

-- A big file's diff carries only its changed region (`_meta.agentServer.diff {partial, oldLine,
-- newLine}`, docs/protocol.md): the hunk headers are shifted to the file's own line numbers.
-- Line endings: a CRLF file on both sides is diffed on its lines and said once in the header; any
-- other carriage return shows as "␍", never raw.
local function crlf_only(s)
  return s:find("\r\n", 1, true) ~= nil and not s:gsub("\r\n", ""):find("[\r\n]")
end

local function unified(old, new, path, meta)
  old, new = old or "", new or ""
  local note = ""
  if (crlf_only(old) or old == "") and (crlf_only(new) or new == "") and (old ~= "" or new ~= "") then
    old, new, note = old:gsub("\r\n", "\n"), new:gsub("\r\n", "\n"), " (CRLF line endings)"
  end
  local diff = require("agent_server.text").diff(old, new, { result_type = "unified", ctxlen = 3 })
  local part = type(meta) == "table" and type(meta.agentServer) == "table" and meta.agentServer.diff or nil
  local shift_old = part and part.partial == true and tonumber(part.oldLine) and (tonumber(part.oldLine) - 1) or 0
  local shift_new = part and part.partial == true and tonumber(part.newLine) and (tonumber(part.newLine) - 1) or 0
  local lines = { "--- " .. tostring(path) .. note, "+++ " .. tostring(path) .. note }
  for _, l in ipairs(vim.split((diff or ""):gsub("\n$", ""), "\n", { plain = true })) do
    l = l:gsub("\r", "␍")
    if shift_old + shift_new > 0 then
      l = l:gsub("^@@ %-(%d+)(%S*) %+(%d+)", function(a, rest, b)
        return string.format("@@ -%d%s +%d", tonumber(a) + shift_old, rest, tonumber(b) + shift_new)
      end)
    end
    lines[#lines + 1] = l
  end
  -- a fence longer than any run of backticks in the diff: the file's text cannot close it
  local longest = 2
  for _, l in ipairs(lines) do
    for run in l:gmatch("`+") do
      longest = math.max(longest, #run)
    end
  end
  local fence = string.rep("`", longest + 1)
  table.insert(lines, 1, fence .. "diff")
  lines[#lines + 1] = fence
  return lines
end

--- Lines describing the question: title, reasons, diffs.
function M.describe(tool_call)
  local title = tostring(tool_call.title or tool_call.toolCallId or "a tool call"):gsub("\r?\n", " ⏎ ")
  local lines = { "**Permission needed:** " .. title }
  for _, c in ipairs(tool_call.content or {}) do
    if c.type == "diff" then
      vim.list_extend(lines, unified(c.oldText, c.newText, c.path, c._meta))
    elseif c.type == "content" and c.content and type(c.content.text) == "string" then
      vim.list_extend(lines, vim.split(c.content.text, "\n", { plain = true }))
    end
  end
  local raw = tool_call.rawInput
  if #lines == 1 and type(raw) == "table" and type(raw.command) == "string" then
    lines[#lines + 1] = "`" .. raw.command:gsub("\n", " ") .. "`"
  end
  return lines
end

local function has_diff(tool_call)
  for _, c in ipairs(tool_call.content or {}) do
    if c.type == "diff" then
      return true
    end
  end
  return false
end

--- A shell command on one line, never shortened, nothing hidden: a run of 8 or more blanks is
--- shown as "⟨N spaces⟩" (a tail pushed off the screen is how a command slips past a reviewer),
--- line breaks as "⏎", other control characters escaped ("\x1b").
function M.visible(command)
  local s = vim.trim(command):gsub("\r?\n", " ⏎ ")
  s = s:gsub("[ \t]+", function(run)
    return #run >= 8 and string.format("⟨%d spaces⟩", #run) or " "
  end)
  return (s:gsub("%c", function(c)
    return string.format("\\x%02x", c:byte())
  end))
end

--- The picker's prompt: the call's title and what it would do when the title does not say it — a
--- shell command (whole, `M.visible`) or a pointer to the diff in the chat — so the choice is made
--- seeing the command even where the picker covers the chat.
function M.prompt(tool_call)
  local title = tostring(tool_call.title or "allow this tool call?"):gsub("\n", " ")
  local raw = tool_call.rawInput
  local extra
  if type(raw) == "table" and type(raw.command) == "string" and raw.command:match("%S") then
    local command = M.visible(raw.command)
    if not title:find(command, 1, true) then
      extra = "$ " .. command
    end
  elseif has_diff(tool_call) then
    extra = "the diff is in the chat"
  end
  return "agent-server: " .. title .. (extra and (" — " .. extra) or "")
end

-- The question whose picker is open (a picker plugin's: it stays open while Neovim goes on), and the
-- questions whose pickers wait for it, in the order asked: one picker at a time — a plugin's picker
-- ends the one open with no choice when another opens (telescope-ui-select, dressing), which would
-- deny a question the user never saw.
local picking
local to_pick = {}

-- Question `entry` was answered (by its picker, :AgentAnswer N, a cancel): the next picker waiting opens.
local function picked(entry)
  to_pick = vim.tbl_filter(function(e) return e ~= entry and open[e] end, to_pick)
  if picking ~= entry and picking ~= nil and open[picking] then
    return
  end
  picking = nil
  local nxt = table.remove(to_pick, 1)
  if nxt then
    vim.schedule(function() -- after the answered picker has closed
      if open[nxt] then
        M.pick(nxt)
      end
    end)
  end
end

-- Draw question `entry` in the chat, under its tool call, and offer its options (the chat's numbered
-- line, or the picker a plugin installed).
local function show(entry)
  local modal = modal_select()
  local lines = M.describe(entry.params.toolCall or {})
  if modal and #entry.options > 0 then
    lines[#lines + 1] = M.options_line(entry.options)
  end
  local drawn, h = pcall(M.hooks.asked, entry.params, lines)
  entry.handle = drawn and h or nil
  if #entry.options == 0 then
    return
  end
  pcall(M.hooks.reveal) -- the question on screen first (a failure to show it must not allow anything)
  if modal then
    -- nothing modal: the question waits in the chat, the user looks at the file or the chat first
    pcall(vim.api.nvim_echo, { { entry.prompt .. " — :AgentAnswer N (the options are in the chat)", "WarningMsg" } }, true, {})
    return
  end
  M.pick(entry)
end

--- Handle the server's request (`req` from `rpc`).
function M.ask(req)
  local params = req.params
  local options = params.options or {}
  asked = asked + 1
  local entry = { req = req, options = options, seq = asked, prompt = M.prompt(params.toolCall or {}),
    params = params, session = params.sessionId }
  open[entry] = true
  local function answer(result, said)
    if req.answered() then
      return
    end
    open[entry] = nil
    req.reply(result)
    pcall(M.hooks.answered, entry.handle, said)
    picked(entry)
  end
  function req.on_cancel()
    answer({ outcome = { outcome = "cancelled" } }, "permission: cancelled")
  end
  entry.cancel = req.on_cancel
  function entry.choose(choice)
    if choice and choice.optionId then
      answer({ outcome = { outcome = "selected", optionId = choice.optionId } }, "permission: " .. (choice.name or choice.optionId))
    else
      answer({ outcome = { outcome = "cancelled" } }, "permission: dismissed — denied")
    end
  end
  function entry.fail(err)
    answer({ outcome = { outcome = "cancelled" } }, "permission: could not ask (" .. tostring(err) .. ") — denied")
  end
  show(entry)
  if #options == 0 then
    return answer({ outcome = { outcome = "cancelled" } }, "permission: no options offered — denied")
  end
end

--- Session `id` is shown in the chat now (loaded, resumed): its questions still waiting are drawn
--- in its transcript, in the order asked (the replay drew their tool calls).
function M.session_shown(id)
  local mine = {}
  for entry in pairs(open) do
    if entry.session == id then
      mine[#mine + 1] = entry
    end
  end
  table.sort(mine, function(a, b) return a.seq < b.seq end)
  for _, entry in ipairs(mine) do
    show(entry)
  end
end

--- Open the picker (`vim.ui.select`) for question `entry` — once no other question's picker is open
--- (then it waits its turn: returns false); a dismissed picker denies.
function M.pick(entry)
  if picking and picking ~= entry and open[picking] then
    if not vim.tbl_contains(to_pick, entry) then
      to_pick[#to_pick + 1] = entry
    end
    return false
  end
  picking = entry
  local ok, err = pcall(vim.ui.select, entry.options, {
    prompt = entry.prompt,
    kind = "agent_server.permission",
    format_item = function(o)
      return o.name or o.optionId
    end,
  }, entry.choose)
  if not ok then
    entry.fail(err)
  end
  return true
end


-- Where question `entry` stands in the chat: `{row, n}` (`n`: its order among the questions of one
-- tool call), or after every drawn one, in the order asked, when it is not drawn.
local function place(entry)
  local ok, row, n = pcall(M.hooks.place, entry.handle)
  if ok and type(row) == "number" then
    return row, n or 0
  end
  return math.huge, entry.seq
end

--- The waiting questions, top-most in the chat first (the order they are read in: two reads of one
--- answer run side by side and both may ask; the chat draws each under its own call).
function M.waiting_list()
  local list = {}
  for entry in pairs(open) do
    local row, n = place(entry)
    list[#list + 1] = { entry = entry, row = row, n = n }
  end
  table.sort(list, function(a, b)
    if a.row ~= b.row then
      return a.row < b.row
    end
    if a.n ~= b.n then
      return a.n < b.n
    end
    return a.entry.seq < b.entry.seq
  end)
  return vim.tbl_map(function(x) return x.entry end, list)
end

--- Answer the top-most waiting question in the chat with its option `n` (1-based), or with the
--- picker when `n` is nil; when another question still waits, the user is told which comes next.
--- Returns nil and why when there is none or `n` is not one of its options.
function M.answer(n)
  local first = M.waiting_list()[1]
  if not first then
    return nil, "no question waits for an answer"
  end
  if n == nil then
    if not M.pick(first) then
      return nil, "another question's picker is open: answer it first (this one's opens next)"
    end
    return true
  end
  local choice = first.options[n]
  if not choice then
    return nil, string.format("no option %s: the question has %d", tostring(n), #first.options)
  end
  first.choose(choice)
  local next_one = M.waiting_list()[1]
  if next_one then
    pcall(vim.api.nvim_echo, { { string.format("%s answered (%s); next: %s — :AgentAnswer N",
      first.prompt, choice.name or choice.optionId, next_one.prompt), "WarningMsg" } }, true, {})
  end
  return true
end

--- Whether a question waits for the user.
function M.waiting()
  return next(open) ~= nil
end

--- Answer every open question of session `session_id` (all of them when nil) `cancelled` (its turn
--- was cancelled; another session's turn goes on, its questions wait).
function M.cancel_all(session_id)
  for entry in pairs(open) do
    if session_id == nil or entry.session == nil or entry.session == session_id then
      entry.cancel()
    end
  end
end

return M
