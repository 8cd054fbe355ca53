--- The chat buffer: a markdown transcript folded from the client's events.
---
--- Streamed text and thoughts go to a pending list and are drawn at most once per
--- `redraw_ms` (a timer + `vim.schedule`), so a flood of one-character chunks never freezes the
--- editor; a turn's end always flushes and returns the header to idle. Thoughts are `> ` quoted
--- lines folded by the window's foldexpr; each tool call is one line whose status sign changes in
--- place (an extmark keeps its line), with the permission questions about it and their outcomes under
--- it; the plan block is replaced in place; usage, mode and state are in the header line.
---
--- Prompts overlap: a slash command typed while a turn waits (for an edit proposal, a permission)
--- is answered at once, other prompts queue on the server. Each answer writes its stop line, but
--- only the last open prompt's answer marks tool calls still open as unfinished and returns the
--- header to idle. The buffer itself (lines, the open streamed line, blocks at marks) is
--- `transcript`'s.
---
--- Must never: hold state the event stream cannot rebuild (replaying `session/load` through the
--- same fold draws the same chat), or draw model or server text as the chat's own lines (`M.filter`).
local config = require("agent_server.config")
local transcript = require("agent_server.transcript")

local M = {}

local uv = vim.uv or vim.loop

local SIGNS = {
  pending = "⏳",
  in_progress = "⚙",
  completed = "✓",
  failed = "✗",
  unfinished = "⚠",
}

local S = {
  pending = {},
  section = nil, -- "user" | "agent"
  tools = {},
  plan = nil,
  running = 0, -- prompts sent and not answered yet (they overlap: see finish_turn)
  turns_open = 0, -- of those, the ones that run a turn (not commands answered at once): in order
  queued = {}, -- prompts sent while a turn ran: drawn when the turn before them ends
  answering = {}, -- slash commands answered at once, not answered yet: their prompt's blocks ->
  -- { before = the mark of the "## You" line of the next prompt drawn after them, or nil }
  command_text = {}, -- the text of their answers (`cmd-N` chunks; chunks without `messageId` while no
  -- turn runs) until one is answered
  after_turn = nil, -- the mark of the "## You" line of the first command drawn while the turn ran
  -- and since it last drew at the end of the chat: its answer ends above it (`end_line`)
  header = { state = "idle" },
  left = {}, -- sessions the chat left (another was loaded or started) while their turns may run on:
  -- id -> { mark = the first line drawn after their part, running, turns_open, queued: theirs as above }
  timer = nil,
  flush_scheduled = false,
}
M.state = S

local function header_text()
  local h = S.header
  local parts = { "agent-server", h.state }
  if h.session then
    parts[#parts + 1] = "session " .. h.session:sub(1, 12)
  end
  if h.mode then
    parts[#parts + 1] = "mode " .. h.mode
  end
  if h.usage then
    parts[#parts + 1] = h.usage
  end
  return ("<!-- " .. table.concat(parts, " · ") .. " -->"):gsub("[\r\n]", " ") -- one line, whatever the server sends
end

local set_keys, note, first_line, leave, come_back, left_turn_end -- below

--- The chat buffer (created on first use; a new one starts without sections, tool lines or plan).
function M.buffer()
  local buf, created = transcript.buffer(header_text())
  if created then
    S.section, S.tools, S.plan, S.tool_lines = nil, {}, nil, {}
    vim.bo[buf].omnifunc = "v:lua.require'agent_server.chat'.complete"
    set_keys(buf)
  end
  return buf
end

local function set_header()
  transcript.set_header(header_text())
end

--- Fold level of line `lnum` in the chat window: thoughts fold (the model's own `> ` quotes do not).
function M.foldexpr(lnum)
  return transcript.is_thought((lnum or vim.v.lnum) - 1) and "1" or "0"
end

--- Open (or focus) the chat window. `focus=false` keeps the cursor where it is.
function M.open(focus)
  local buf = M.buffer()
  local wins = vim.fn.win_findbuf(buf)
  local win = wins[1]
  if not win then
    local prev = vim.api.nvim_get_current_win()
    local c = config.get().chat
    if c.position == "tab" then
      vim.cmd("tab sbuffer " .. buf)
    elseif c.position == "below" then
      vim.cmd("botright " .. c.height .. "split")
      vim.api.nvim_win_set_buf(0, buf)
    else
      vim.cmd((c.position == "left" and "topleft " or "botright ") .. "vertical " .. c.width .. "split")
      vim.api.nvim_win_set_buf(0, buf)
    end
    win = vim.api.nvim_get_current_win()
    vim.wo[win].wrap = true
    vim.wo[win].linebreak = true
    vim.wo[win].foldmethod = "expr"
    vim.wo[win].foldexpr = "v:lua.require'agent_server.chat'.foldexpr(v:lnum)"
    vim.wo[win].foldlevel = 0
    vim.wo[win].foldenable = true
    pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(buf), 0 })
    if focus == false and vim.api.nvim_win_is_valid(prev) then
      vim.api.nvim_set_current_win(prev)
    end
  elseif focus ~= false then
    vim.api.nvim_set_current_win(win)
  end
  -- 'modifiable' follows the cursor now, not at the next CursorMoved: BufEnter saw the cursor on
  -- the first line, and keys typed before the main loop's next turn (a mapping, `:AgentChat | startinsert`)
  -- were refused (E21) in the prompt area
  transcript.guard()
  return win
end

-- Model text (and the user's) is drawn as buffer text, never as the chat's own structure. A line
-- of it that would read as one of the chat's own lines — a "## You" / "## Agent" / "# Session"
-- heading (also a setext one), a stop line ("_— stop: … —_"), "**error:**", "**Plan**", a tool line
-- ("- ✓ …"), a server notice ("[agent-server] …"), the prompt separator — gets a markdown backslash escape ("\## You": the same text
-- once rendered, and copied as valid markdown), except inside a fenced code block, whose lines
-- are code and stay byte for byte. The chat's own lines carry a sign (`transcript.mark_own`)
-- that no text can make, and the chat finds its turns by those marks, never by text.
local TOOL_SIGNS = { "⏳", "⚙", "✓", "✗", "⚠", "•" }

local function own_heading(text)
  local words = text:gsub("[%*_`]", ""):gsub("#+%s*$", "")
  words = vim.trim(words):lower()
  return words == "you" or words == "agent" or words:match("^session") ~= nil
end

--- Whether a line of model or user text would read as one of the chat's own lines; `prev`: the
--- line before it (a setext heading's text), or nil.
function M.looks_own(raw, prev)
  local body = raw:gsub("^ ? ? ?", "", 1)
  local heading = body:match("^#+(.*)$")
  if heading and (heading == "" or heading:match("^%s")) and own_heading(heading) then
    return true
  end
  if body:match("^[_%*]+%s*—") or body:match("^%*%*error:") or body:match("^%*%*agent%-server")
      or body:match("^%*%*[Pp]lan%*%*") or body:match("^%*%*Permission needed") or vim.startswith(body, "───")
      or vim.startswith(body, "[agent-server]") then
    return true
  end
  local item = body:match("^[-*+]%s+(.*)$")
  if item then
    for _, sign in ipairs(TOOL_SIGNS) do
      if vim.startswith(item, sign) then
        return true
      end
    end
  end
  if prev and body:match("^[=-]+%s*$") and own_heading(prev) then
    return true
  end
  return false
end

--- A line filter for `transcript.stream`: escapes lines that look like the chat's own (`looks_own`)
--- outside fenced code blocks; `fence` is the open fence's marker, else nil.
function M.filter()
  local f = { fence = nil, prev = nil }
  function f.show(raw)
    if f.fence or not M.looks_own(raw, f.prev) then
      return raw
    end
    return (raw:gsub("^( ? ? ?)", "%1\\", 1))
  end
  function f.done(raw)
    local marker = raw:match("^ ? ? ?(```+)") or raw:match("^ ? ? ?(~~~+)")
    if f.fence then
      if marker and marker:sub(1, 1) == f.fence:sub(1, 1) and #marker >= #f.fence and raw:match("^%s*[`~]+%s*$") then
        f.fence = nil
      end
    elseif marker then
      f.fence = marker
    end
    f.prev = (not f.fence and raw:match("%S")) and raw or nil
  end
  return f
end

local filters = { text = M.filter(), user = M.filter() }

-- Lines of model or user text drawn whole (a prompt echoed): escaped as a stream is.
local function escaped(lines)
  local f = M.filter()
  local out = {}
  for i, l in ipairs(lines) do
    out[i] = f.show(l)
    f.done(l)
  end
  return out
end

-- Append whole lines (ends any open text line); the 0-based row of the first one. `own`: how many of
-- them, from the first, are the chat's own (marked: `transcript.mark_own`); all when nil. A code
-- block the model's text left open is closed first, so the chat's lines are never drawn as code.
local function add_lines(lines, own)
  M.buffer()
  transcript.finish_line()
  local close = filters.text.fence or filters.user.fence
  filters.text, filters.user = M.filter(), M.filter()
  if close then
    lines = vim.list_extend({ close }, lines)
    own = own and own + 1
  end
  local row = transcript.add_lines(lines)
  for i = 1, math.min(own or #lines, #lines) do
    if lines[i] ~= "" then
      transcript.mark_own(row + i - 1)
    end
  end
  return close and row + 1 or row
end

-- The session the chat left `sid` belongs to (`S.left`), when its part is still in the chat: what it
-- still does is drawn there (`draw_in`), never where the session shown is drawn.
local function left_part(sid)
  local l = sid ~= nil and sid ~= S.header.session and S.left[sid] or nil
  return l and transcript.mark_row(l.mark) and l or nil
end

--- Whether session `sid` is one the chat left for another (its events are not the shown session's).
function M.left_behind(sid)
  return left_part(sid) ~= nil
end

-- Draw `lines` at the end of left session part `l` (above the blank line before the heading that
-- follows it); `own`: how many of them, from the first, are the chat's own (all when nil). The
-- 0-based row of the first one.
local function draw_in(l, lines, own)
  local at = transcript.mark_row(l.mark) - 1
  transcript.insert_lines(at, vim.list_extend({ "" }, lines))
  for i = 1, math.min(own or #lines, #lines) do
    if lines[i] ~= "" then
      transcript.mark_own(at + i)
    end
  end
  return at + 1
end

-- The turn drew at the end of the chat (a tool line, a plan, a note, text not held): its answer
-- no longer ends above the commands drawn before.
local function turn_drew_at_end()
  transcript.forget_mark(S.after_turn)
  S.after_turn = nil
end

local function ensure_section(kind)
  if S.section ~= kind then
    add_lines({ "", kind == "user" and "## You" or "## Agent", "" })
    S.section = kind
  end
end

--- The key of the model's text and thoughts that come without `messageId` (an agent that sends
--- none): one stream, held while a command's exchange is drawn (`transcript.hold`) as an id's is.
M.NO_ID = "\0no-id"

-- Whether streamed text of `key` is a command's answer, not the turn's: a reply drawn with its
-- command (`finish_turn`: key nil), or agent-server's `cmd-N`.
local function command_key(key)
  return key == nil or key:sub(1, 4) == "cmd-"
end

--- Draw what is pending now.
function M.flush()
  S.flush_scheduled = false
  if #S.pending == 0 or not transcript.valid() then
    S.pending = {}
    return
  end
  local pending = S.pending
  S.pending = {}
  local i = 1
  while i <= #pending do
    local kind, key = pending[i].kind, pending[i].key
    local parts = {}
    while i <= #pending and pending[i].kind == kind and pending[i].key == key do
      parts[#parts + 1] = pending[i].text
      i = i + 1
    end
    if not transcript.holds(key) then -- a held stream goes on where it was, in its section
      ensure_section(kind == "user" and "user" or "agent")
    end
    if not transcript.holds(key, kind) and not command_key(key) then
      turn_drew_at_end()
    end
    transcript.stream(kind, table.concat(parts), filters[kind], key)
  end
end

-- Streamed text of `kind`; `key`: its chunks' `messageId` (routed by it: `transcript.hold`), or nil.
local function queue(kind, s, key)
  if type(s) ~= "string" or s == "" then
    return
  end
  key = type(key) == "string" and key or nil
  local last = S.pending[#S.pending]
  if last and last.kind == kind and last.key == key and #last.text < 4096 then
    last.text = last.text .. s
  else
    S.pending[#S.pending + 1] = { kind = kind, text = s, key = key }
  end
  if not S.flush_scheduled then
    S.flush_scheduled = true
    S.timer = S.timer or uv.new_timer()
    S.timer:start(config.get().redraw_ms, 0, vim.schedule_wrap(M.flush))
  end
end

--- Write an info line (outside the stream, after what is pending). One line is emphasised; of
--- several, the first is the chat's (a title) and the rest are the server's or the model's words
--- (a question's reasons, a diff): drawn as a stream's text is (`M.filter`), never as the chat's own.
function M.say(s, level)
  M.flush()
  M.buffer()
  local lines = vim.split(s, "\n", { plain = true })
  if #lines == 1 then
    local mark = level == "error" and "**" or "_"
    return add_lines({ mark .. lines[1] .. mark })
  end
  local f = M.filter()
  local out = { lines[1] }
  for i = 2, #lines do
    out[i] = f.show(lines[i])
    f.done(lines[i])
  end
  if f.fence then -- a code block left open is closed: the chat's next line is never code
    out[#out + 1] = f.fence
  end
  add_lines(out, 1)
end

--- `M.say` for session `session_id`: in its part of the chat when the chat left it for another
--- session (`M.left_behind`), else as `M.say`.
function M.say_for(session_id, s, level)
  local l = left_part(session_id)
  if not l then
    return M.say(s, level)
  end
  local lines = vim.split(s, "\n", { plain = true })
  if #lines == 1 then
    local mark = level == "error" and "**" or "_"
    return draw_in(l, { mark .. lines[1] .. mark })
  end
  local f = M.filter()
  local out = { lines[1] }
  for i = 2, #lines do
    out[i] = f.show(lines[i])
    f.done(lines[i])
  end
  if f.fence then
    out[#out + 1] = f.fence
  end
  draw_in(l, out, 1)
end

--- A short notice at the end of the chat that session `session_id`, which the chat left for
--- another, needs the user (`what`: "asks: …", "proposes …"); where its part of the chat is.
function M.notice_for(session_id, what)
  M.say(string.format("Session %s (not the one shown; its part of the chat is above) %s", tostring(session_id),
    what))
end

--- Lines of a shell command's live output shown under its tool line (the last ones).
M.OUTPUT_LINES = 6

local function elapsed(t)
  if not t.started then
    return nil
  end
  local ms = ((t.finished or uv.hrtime()) - t.started) / 1e6
  return ms < 60000 and string.format("%.1f s", ms / 1000) or string.format("%d min %02d s", ms / 60000, (ms / 1000) % 60)
end

local function tool_line(t)
  local sign = SIGNS[t.status] or "•"
  local title = (t.title or "tool"):gsub("\n", " ")
  local s = string.format("- %s %s", sign, title)
  if t.command and not title:find(t.command, 1, true) then
    s = s .. " — `" .. t.command:gsub("\n", "⏎"):gsub("`", "'") .. "`" -- the command whole, never cut
  end
  if t.kind == "execute" and t.started and (t.finished or t.status == "in_progress") then
    s = s .. " · " .. elapsed(t) .. (t.exit_code and t.exit_code ~= 0 and (" · exit " .. t.exit_code) or "")
  end
  if t.status == "unfinished" then
    s = s .. " (unfinished)"
  elseif t.note then
    s = s .. " — " .. t.note
  end
  return s
end

--- An edit applied without review (`accept-edits`) shows at most this many lines of its diff.
M.DIFF_LINES = 40

--- The unified diff of a `diff` content block (`oldText` nil for a new file), as lines.
local function diff_lines(c)
  local old = type(c.oldText) == "string" and c.oldText or ""
  local new = type(c.newText) == "string" and c.newText or ""
  local differ = (vim.text and vim.text.diff) or vim.diff
  local ok, unified = pcall(differ, old, new, { result_type = "unified", ctxlen = 1 })
  if not ok or type(unified) ~= "string" then
    return {}
  end
  local out = vim.split(unified:gsub("\n$", ""), "\n", { plain = true })
  if #out > M.DIFF_LINES then
    local more = #out - M.DIFF_LINES
    out = vim.list_slice(out, 1, M.DIFF_LINES)
    out[#out + 1] = string.format("… %d more line%s", more, more == 1 and "" or "s")
  end
  return out
end

-- The tool's block: its line, then the diff of an edit applied without review, then the permission
-- questions asked about it with their outcomes, in the order asked, then the last lines of its live
-- output (indented, quoted as code). Also which of its lines (1-based) are the chat's own: the tool
-- line, each question's title and outcome.
local function tool_block(t)
  local lines, own = { tool_line(t) }, { 1 }
  for _, l in ipairs(t.diff or {}) do
    lines[#lines + 1] = "    │ " .. l:gsub("\r", "")
  end
  for _, q in ipairs(t.questions or {}) do
    own[#own + 1] = #lines + 1
    vim.list_extend(lines, q.lines)
    if q.outcome then
      lines[#lines + 1] = "_" .. q.outcome:gsub("\n", " ") .. "_"
      own[#own + 1] = #lines
    end
  end
  if t.output and t.output ~= "" then
    local out = vim.split(t.output:gsub("\n$", ""), "\n", { plain = true })
    for i = math.max(1, #out - M.OUTPUT_LINES + 1), #out do
      lines[#lines + 1] = "    │ " .. out[i]:gsub("\r", "")
    end
  end
  return lines, own
end

local function redraw_tool(t)
  local lines, own = tool_block(t)
  transcript.replace_at(t.mark, t.count or 1, lines, own) -- its first line keeps its mark
  t.count = #lines
end

-- A piece of a shell command's live output (`_meta.terminal_output.data`, to append).
local function on_output(t, data)
  t.output = ((t.output or "") .. data):sub(-8192)
  redraw_tool(t)
end

--- A tool line's note (a failed call's reason) is at most this many characters, "…" ending a cut one.
M.NOTE_CHARS = 200

local function first_text(content)
  for _, c in ipairs(content or {}) do
    local t = c.content and c.content.text
    if type(t) == "string" and t:match("%S") then
      local line = t:match("^%s*([^\n]*)") or ""
      if vim.fn.strchars(line) > M.NOTE_CHARS then -- cut at a character, and said to be cut
        line = vim.fn.strcharpart(line, 0, M.NOTE_CHARS - 1) .. "…"
      end
      return line
    end
  end
end

-- Tool lines are keyed by session and call: ids (`tc-<seq>`) restart in each session, so a call
-- of a new session (after a crash, a load) never redraws a line of an earlier one.
local function tool_key(session_id, id)
  return tostring(session_id or "") .. "\0" .. tostring(id)
end

local function on_tool_call(u, session_id)
  local l = left_part(session_id)
  local t = { id = u.toolCallId, title = u.title, status = u.status or "pending", kind = u.kind, session = session_id }
  local raw = type(u.rawInput) == "table" and u.rawInput or {}
  t.command = type(raw.command) == "string" and raw.command or nil
  if t.kind == "execute" and (t.status == "in_progress" or t.status == "pending") then
    t.started = uv.hrtime()
  end
  if t.status == "failed" then -- a replayed call comes whole, with its final status and reason
    t.note = first_text(u.content)
  end
  t.locations = u.locations
  local row
  if l then -- a call of a session the chat left (a question about it): in that session's part
    row = draw_in(l, { tool_line(t) })
  else
    M.flush()
    transcript.release() -- the turn's text before it is complete
    turn_drew_at_end()
    ensure_section("agent")
    row = add_lines({ tool_line(t) })
  end
  t.mark = transcript.place_mark(row)
  S.tools[tool_key(session_id, u.toolCallId)] = t
  S.tool_lines = S.tool_lines or {}
  S.tool_lines[#S.tool_lines + 1] = t
end

-- A permission question's lines as drawn: its title (the chat's own), then the server's and the
-- model's words (reasons, a command, a diff) drawn as a stream's text is (`M.filter`), a code block
-- left open closed.
local function question_lines(lines)
  local f = M.filter()
  local out = { lines[1] or "" }
  for i = 2, #lines do
    out[i] = f.show(lines[i])
    f.done(lines[i])
  end
  if f.fence then
    out[#out + 1] = f.fence
  end
  return out
end

local asked = 0

--- Draw a permission question (`lines`: its title, then its reasons, command or diff) in the block
--- of the tool call it is about (`tool_call`, the request's `toolCall`, of session `session_id`),
--- under that call's line: it belongs to the call and to its turn, wherever the chat's end is by
--- then (a command's exchange, more text, the turn's stop line are drawn below it, never between
--- it and its call). A call the chat has no line for gets one at the end. Returns the question's
--- handle for `M.outcome`.
function M.question(session_id, tool_call, lines)
  M.flush()
  M.buffer()
  tool_call = type(tool_call) == "table" and tool_call or {}
  local id = tool_call.toolCallId
  if id == nil then
    asked = asked + 1
    id = "\0question-" .. asked
  end
  local t = S.tools[tool_key(session_id, id)]
  if not t or not transcript.mark_row(t.mark) then
    on_tool_call(vim.tbl_extend("force", tool_call, { toolCallId = id, status = tool_call.status or "pending" }), session_id)
    t = S.tools[tool_key(session_id, id)]
  end
  local q = { lines = question_lines(lines) }
  t.questions = t.questions or {}
  t.questions[#t.questions + 1] = q
  redraw_tool(t)
  if left_part(session_id) then -- it needs the user, who looks at another session: said at the end
    local how
    for _, l in ipairs(lines) do
      how = type(l) == "string" and l:match("^Answer with :AgentAnswer N.*") or how
    end
    M.notice_for(session_id, string.format("asks: %s — %s", tostring(tool_call.title or "a tool call"):gsub("\n", " "),
      how or "the picker asks it"))
  end
  return { tool = t, question = q }
end

--- Where question `handle` (`M.question`) stands in the chat: the row of its tool call's line and
--- its order among that call's questions; nil when its block is gone.
function M.question_place(handle)
  local t, q = type(handle) == "table" and handle.tool, type(handle) == "table" and handle.question
  local row = t and q and transcript.mark_row(t.mark)
  if not row then
    return nil
  end
  for i, other in ipairs(t.questions or {}) do
    if other == q then
      return row, i
    end
  end
  return row, 0
end

--- The outcome of question `handle` (`M.question`), drawn under it ("permission: Allow once"), also
--- when the turn has ended or more was drawn since; at the chat's end when its block is gone.
function M.outcome(handle, text)
  local t, q = type(handle) == "table" and handle.tool, type(handle) == "table" and handle.question
  if t and q and transcript.mark_row(t.mark) then
    q.outcome = text
    return redraw_tool(t)
  end
  M.say(text)
end

-- In `accept-edits` an edit lands without a proposal to review: its card shows the diff instead.
local function take_diff(t, content)
  if S.header.mode ~= "accept-edits" then
    return
  end
  for _, c in ipairs(type(content) == "table" and content or {}) do
    if type(c) == "table" and c.type == "diff" then
      t.diff = diff_lines(c)
      return
    end
  end
end

local function on_tool_update(u, session_id)
  local key = tool_key(session_id, u.toolCallId)
  local t = S.tools[key]
  if not t and S.unfinished and S.unfinished[key] and transcript.mark_row(S.unfinished[key].mark) then
    t = S.unfinished[key] -- a call the dead server left open, closed by the one that resumed the session
    S.unfinished[key] = nil
  end
  if not t then
    return on_tool_call(u, session_id)
  end
  if u.title then
    t.title = u.title
  end
  if type(u.locations) == "table" and #u.locations > 0 then
    t.locations = u.locations
  end
  if u.status then
    t.status = u.status
  end
  if type(u.rawInput) == "table" and type(u.rawInput.command) == "string" then
    t.command = u.rawInput.command
  end
  local meta = type(u._meta) == "table" and u._meta or {}
  if t.kind == "execute" and t.status == "in_progress" and not t.started then
    t.started = uv.hrtime()
  end
  if (t.status == "completed" or t.status == "failed") and t.started and not t.finished then
    t.finished = uv.hrtime()
  end
  if type(meta.terminal_exit) == "table" and type(meta.terminal_exit.exit_code) == "number" then
    t.exit_code = meta.terminal_exit.exit_code
  end
  if t.status == "failed" then
    t.note = first_text(u.content) or t.note
  end
  take_diff(t, u.content)
  local restore = type(meta.agentServer) == "table" and meta.agentServer.restore
  if type(restore) == "table" and t.status == "completed" and type(restore.changed) == "table" then
    for _, path in ipairs(restore.changed) do -- written on disk under unsaved text: :w need not warn
      if type(path) == "string" then
        pcall(require("agent_server.buffers").adopt_disk, path)
      end
    end
  end
  local out = meta.terminal_output or meta.terminal_output_delta
  if type(out) == "table" and type(out.data) == "string" then
    return on_output(t, out.data)
  end
  redraw_tool(t)
end

local function on_plan(u)
  M.flush()
  transcript.release()
  local lines = { "**Plan**" }
  for _, e in ipairs(u.entries or {}) do
    local box = e.status == "completed" and "[x]" or (e.status == "in_progress" and "[~]" or "[ ]")
    lines[#lines + 1] = string.format("- %s %s", box, tostring(e.content):gsub("\n", " "))
  end
  if S.plan and transcript.mark_row(S.plan.mark) and S.plan.turn == S.turn then
    transcript.replace_at(S.plan.mark, S.plan.count, lines)
    S.plan.count = #lines
  else
    turn_drew_at_end()
    ensure_section("agent")
    local row = add_lines(lines, 1)
    S.plan = { mark = transcript.place_mark(row), count = #lines, turn = S.turn }
  end
end

local function on_update(u, session_id)
  local kind = u.sessionUpdate
  if kind == "agent_thought_chunk" or kind == "tool_call" then
    S.turn_answered = true
  end
  if kind == "agent_message_chunk" then
    local meta = type(u._meta) == "table" and type(u._meta.agentServer) == "table" and u._meta.agentServer or {}
    if meta.notice or meta.retry or meta.waiting or meta.compaction then
      return note(u.content and u.content.text)
    end
    if not (type(u.messageId) == "string" and u.messageId:sub(1, 4) == "cmd-") then
      S.turn_answered = true
    end
    -- a command's answer: `cmd-N` (agent-server), or text without `messageId` while no turn runs
    -- (an agent that sends no ids answers its commands so); text without one while a turn runs is
    -- that turn's answer, drawn where it was, never the reply of a command waiting meanwhile
    local command_answer = (type(u.messageId) == "string" and u.messageId:sub(1, 4) == "cmd-")
      or (u.messageId == nil and S.turns_open == 0)
    if command_answer and next(S.answering) ~= nil and type(u.content) == "table"
        and type(u.content.text) == "string" then
      S.command_text[#S.command_text + 1] = u.content.text
      return
    end
    queue("text", u.content and u.content.text, u.messageId or M.NO_ID)
  elseif kind == "agent_thought_chunk" then
    queue("thought", u.content and u.content.text, u.messageId or M.NO_ID)
  elseif kind == "user_message_chunk" then
    local c = u.content or {}
    if c.type == "resource" and c.resource then
      queue("user", "\n`" .. tostring(c.resource.uri) .. "`\n", u.messageId)
    else
      queue("user", c.text, u.messageId)
    end
  elseif kind == "tool_call" then
    on_tool_call(u, session_id)
  elseif kind == "tool_call_update" then
    on_tool_update(u, session_id)
  elseif kind == "plan" then
    on_plan(u)
  elseif kind == "usage_update" then
    if u.used and u.size then
      S.header.usage = string.format("%d/%d tokens", u.used, u.size)
      if type(u.cost) == "table" and u.cost.amount then
        S.header.usage = S.header.usage .. string.format(" %.4f %s", u.cost.amount, u.cost.currency or "")
      end
      set_header()
    end
  elseif kind == "current_mode_update" then
    S.header.mode = u.currentModeId
    set_header()
  elseif kind == "available_commands_update" then
    S.commands = u.availableCommands or {}
  end
end

-- A notice of the server (an `agent_message_chunk` marked `_meta.agentServer.notice`, a retry, a
-- compaction: never the model's text): its first line is the chat's own, the rest (an MCP
-- server's words, a hook's output) drawn as model text is.
function note(text)
  if type(text) ~= "string" or not text:match("%S") then
    return
  end
  M.flush()
  transcript.release() -- a retry's answer (the same messageId) starts below its notice
  turn_drew_at_end()
  ensure_section("agent")
  local lines = vim.split(vim.trim(text), "\n", { plain = true })
  local f = M.filter()
  local out = { "", lines[1] }
  for i = 2, #lines do
    out[#out + 1] = f.show(lines[i])
    f.done(lines[i])
  end
  if f.fence then
    out[#out + 1] = f.fence
  end
  add_lines(out, 2)
  add_lines({ "" }, 0) -- what follows is a paragraph of its own
end

local function prompt_lines(blocks)
  local lines = {}
  for _, b in ipairs(blocks or {}) do
    if b.type == "text" then
      vim.list_extend(lines, vim.split(b.text, "\n", { plain = true }))
    elseif b.type == "resource" and b.resource then
      lines[#lines + 1] = "`" .. tostring(b.resource.uri) .. "`"
    end
  end
  return lines
end

-- Tool lines still open become unfinished (⚠): their turn ended, or the server died under them.
-- `killed`: the server died; the calls left open are kept (`S.unfinished`) for the server that
-- resumes their session, whose update closing such a call (its reason) is drawn on the call's line.
-- `sid`: only the calls of that session (a session the chat left); else those of every session but
-- the ones the chat left (their turns run on), or, killed, of all.
local function close_open_tools(killed, sid)
  local left = {}
  for key, t in pairs(S.tools) do
    local its = killed or (sid ~= nil and t.session == sid) or (sid == nil and not left_part(t.session))
    if its then
      if t.status ~= "completed" and t.status ~= "failed" then
        t.status = "unfinished"
        redraw_tool(t)
        left[key] = t
      end
      S.tools[key] = nil
    end
  end
  if killed then
    S.unfinished = left
  end
end

--- Whether a prompt is a slash command the server answers at once, even while a turn runs (its
--- `parse_command`: one text block `/word …`); `/init` runs a turn, so it queues as a prompt does.
function M.immediate(blocks)
  if type(blocks) ~= "table" or #blocks ~= 1 or blocks[1].type ~= "text" then
    return false
  end
  local name = vim.trim(blocks[1].text or ""):match("^/([A-Za-z][A-Za-z0-9_-]*)")
  local after = name and vim.trim(blocks[1].text):sub(#name + 2, #name + 2)
  return name ~= nil and name ~= "init" and (after == "" or after:match("%s") ~= nil)
end

-- Draw a prompt (its "## You" section, then "## Agent"); the 0-based row of its "## You" line.
local function draw_prompt(blocks)
  S.section = nil
  ensure_section("user")
  local you = transcript.sep_row() - 2
  for _, c in pairs(S.answering) do -- commands not answered yet: their answers go above this prompt
    c.before = c.before or transcript.place_mark(you)
  end
  add_lines(escaped(prompt_lines(blocks)), 0)
  S.section = nil
  ensure_section("agent")
  return you
end

-- The line that ends a prompt's answer (its stop line, its error). A turn's answer ends above the
-- commands drawn while it ran (`S.after_turn`), where a reader looks for its end, not below their
-- exchanges; anything else at the end of the chat.
local function end_line(line, turn)
  local you = turn and transcript.mark_row(S.after_turn)
  if you then
    transcript.insert_lines(you - 1, { "", line }) -- above the blank line before that "## You"
    transcript.mark_own(you)
  else
    add_lines({ "", line })
  end
end

local SIGN_IN = "`:AgentLogin` signs in (`agent-server login` in a "
  .. "terminal), `:AgentSetKey` gives a key to this Neovim's server, or put it in `setup({ env = { "
  .. "AGENT_SERVER_API_KEY = \"…\" } })` (or the provider's own variable, e.g. `DEEPSEEK_API_KEY`) and "
  .. "`:AgentRestart`. See `:help agent-server-signin`._"

-- A prompt's answer. Prompts overlap (a slash command typed while a turn waits for an edit
-- proposal is answered at once; other prompts queue on the server): tool calls still open are
-- marked unfinished, and the header returns to idle, only when the last open prompt is answered.
local function finish_turn(stop, err, blocks, kind)
  local slot = blocks and S.answering[blocks]
  local turn = blocks == nil or not M.immediate(blocks)
  local answer = ""
  if slot then
    S.answering[blocks] = nil
    answer = table.concat(S.command_text)
    S.command_text = {}
  end
  local before = slot and slot.before and transcript.mark_row(slot.before)
  if before and not S.exit_shown and kind ~= "gone" and kind ~= "stopped" then
    -- another prompt was drawn below the command since it was sent: its answer goes under its own
    -- prompt, above the next one, never under the prompts that came after it
    local lines = answer ~= "" and escaped(vim.split((answer:gsub("\n+$", "")), "\n", { plain = true })) or {}
    local f = M.filter()
    for _, l in ipairs(lines) do
      f.done(l)
    end
    if f.fence then
      lines[#lines + 1] = f.fence
    end
    lines[#lines + 1] = ""
    lines[#lines + 1] = err and ("**error:** " .. err:gsub("\n", " "))
      or string.format("_— %s —_", stop == "cancelled" and "cancelled" or ("stop: " .. tostring(stop)))
    local at = before - 1 -- the blank line above that "## You"
    local above = vim.api.nvim_buf_get_lines(transcript.buf(), at - 1, at, false)[1]
    if above ~= "" and above ~= "## Agent" then
      table.insert(lines, 1, "") -- a paragraph of its own below the command's tool lines
    end
    transcript.insert_lines(at, lines)
    transcript.mark_own(at + #lines - 1)
    transcript.forget_mark(slot.before)
    S.running = math.max(0, S.running - 1)
    if S.running == 0 then
      close_open_tools()
      S.header.state = "idle"
    end
    set_header()
    return
  elseif slot then
    transcript.forget_mark(slot.before)
    if answer ~= "" then
      queue("text", answer, nil) -- drawn below its prompt: nothing was drawn after it
    end
  end
  M.flush()
  S.running = math.max(0, S.running - 1)
  if S.running == 0 then
    close_open_tools()
    S.header.state = "idle"
  end
  if err and S.exit_shown then
    -- one report for one event: the server's exit was drawn (with its stderr tail) just above
  elseif kind == "gone" then
    -- the chat knows what the JSON-RPC error ("unknown session: sess_…") means: said in its words only
    add_lines({ "", string.format("_Not sent: session %s is no longer open in this server — another agent-server "
      .. "process took it over. `:AgentSessions` loads it again (taking it back); the next prompt starts a new "
      .. "session._", tostring(S.header.session)) })
    S.header.session = nil
  elseif kind == "stopped" then
    add_lines({ "", "_— stopped: the server was restarted before it answered —_" })
  elseif err then
    end_line("**error:** " .. err:gsub("\n", " "), turn)
    local low = err:lower()
    if kind == "auth" or low:find("http 401", 1, true) or low:find("http 403", 1, true)
        or low:find("api key", 1, true) or low:find("unauthorized", 1, true) then
      add_lines({ "_The model endpoint refused the API key. " .. SIGN_IN })
    elseif kind == "connection" then
      add_lines({ "_The model endpoint could not be reached (the server itself runs): `:checkhealth agent_server` "
        .. "shows the endpoint and model it uses, `:AgentLog` the request's error in full; `:AgentLogin` sets "
        .. "the endpoint up again._" })
    end
  else
    end_line(string.format("_— %s —_", stop == "cancelled" and "cancelled" or ("stop: " .. tostring(stop))), turn)
    local first = type(blocks) == "table" and blocks[1]
    if turn and stop == "cancelled" and not S.turn_answered and type(first) == "table" and first.type == "text" then
      -- cancelled before the agent answered anything (a hanging endpoint): the prompt comes back to
      -- the prompt area, to send again, unless the user typed there meanwhile
      vim.schedule(function()
        if transcript.prompt_text() == "" then
          transcript.set_prompt(first.text)
        end
      end)
    end
  end
  S.section = nil
  if turn then
    -- that turn is over: the server runs the oldest queued prompt now, drawn below it
    transcript.release()
    turn_drew_at_end()
    S.turns_open = math.max(0, S.turns_open - 1)
    local nxt = table.remove(S.queued, 1)
    if nxt then
      S.turn = (S.turn or 0) + 1
      S.turn_answered = false
      draw_prompt(nxt)
      S.header.state = "working"
    end
  end
  set_header()
end

--- Why a load was refused with `SESSION_BUSY` (`busy`: `client.session_busy`), in the chat's words:
--- who holds the session, and why a take-over did not succeed (the part of the server's `message`
--- between its "(another editor window?); " and its protocol hint), never the hint's method names.
function M.busy_text(busy, message)
  local text = "it is open in another agent-server process"
    .. (busy.pid and string.format(" (pid %d)", busy.pid) or "")
  local why = type(message) == "string" and message:match("%(another editor window%?%); (.-); close it there first")
  if why and why ~= "" then
    text = text .. "; " .. why
  end
  return text
end

-- The chat leaves session `id` for another (loaded, or new: the first line drawn for it at 0-based
-- `row`): its turns may run on, and what they still do is drawn in its part, above `row`; the
-- prompts counted from now on are the next session's.
function leave(id, row)
  if id == nil then
    return
  end
  if S.left[id] then
    transcript.forget_mark(S.left[id].mark)
  end
  S.left[id] = { mark = transcript.place_mark(row), running = S.running, turns_open = S.turns_open, queued = S.queued }
  S.running, S.turns_open, S.queued, S.answering, S.command_text = 0, 0, {}, {}, {}
  S.header.state = "idle"
end

-- The chat shows session `id` again (loaded, or a refused load kept it): its prompts still open are
-- counted as the shown session's again.
function come_back(id)
  local l = id ~= nil and S.left[id]
  if not l then
    return
  end
  S.left[id] = nil
  transcript.forget_mark(l.mark)
  S.running, S.turns_open, S.queued = S.running + l.running, S.turns_open + l.turns_open, vim.list_extend(l.queued, S.queued)
  S.header.state = S.running > 0 and "working" or S.header.state
end

-- The end of a prompt of session left `l` (`ev`: its `turn_end`): its stop line in that session's
-- part, and its calls still open closed when it was the last; the session shown is not touched.
function left_turn_end(ev, l)
  l.running = math.max(0, l.running - 1)
  if ev.prompt == nil or not M.immediate(ev.prompt) then
    l.turns_open = math.max(0, l.turns_open - 1)
    table.remove(l.queued, 1) -- the server runs it now: drawn when the session is loaded again
  end
  if l.running == 0 then
    close_open_tools(false, ev.session_id)
  end
  if not transcript.mark_row(l.mark) then
    return
  end
  local why = ev.error and ("**error:** " .. ev.error:gsub("\n", " "))
    or string.format("_— %s (after the chat left this session: `:AgentSessions` loads it whole) —_",
      ev.stop_reason == "cancelled" and "cancelled" or ("stop: " .. tostring(ev.stop_reason)))
  draw_in(l, { why })
end

--- Fold one client event into the chat.
function M.handle(ev)
  if ev.type == "update" then
    if ev.session_id ~= S.header.session and (S.header.session ~= nil or S.left[ev.session_id]) then
      -- a session the chat left: only the lines it drew of it follow (a call that ends there, its
      -- proposal accepted in a tab still open, is never left "⚙" for ever); the rest is not this chat's
      local u = ev.update
      if type(u) == "table" and u.sessionUpdate == "tool_call_update"
          and S.tools[tool_key(ev.session_id, u.toolCallId)] then
        on_tool_update(u, ev.session_id)
      end
      return
    end
    M.buffer()
    on_update(ev.update, ev.session_id)
  elseif ev.type == "turn_start" then
    M.flush()
    M.buffer()
    local immediate = M.immediate(ev.prompt)
    S.exit_shown = false
    S.running = S.running + 1
    S.header.state = "working"
    if not immediate and S.turns_open > 0 then
      -- the server queues it behind the running turn, whose steps are still to come: drawn when it ends
      S.turns_open = S.turns_open + 1
      S.queued[#S.queued + 1] = ev.prompt
      local first = (prompt_lines(ev.prompt)[1] or ""):sub(1, 60)
      pcall(vim.api.nvim_echo, { { "agent-server: queued \"" .. first .. "\" — it runs when the current turn ends" } }, true, {})
      set_header()
      return
    end
    if S.running == 1 then -- a command answered while a turn runs belongs to the same stretch of work
      S.turn = (S.turn or 0) + 1
    end
    if not immediate then
      S.turns_open = S.turns_open + 1
    elseif S.turns_open > 0 then
      -- a command answered at once while the turn's answer streams: drawn below it, and the answer
      -- goes on where it was (routed by its `messageId`), never split by the command's exchange
      if transcript.hold() then
        -- the held stream keeps its filter (and its code block: `transcript.fence_below` closes it
        -- below itself): the chat's lines drawn next start afresh
        filters.text, filters.user = M.filter(), M.filter()
      end
    end
    local you = draw_prompt(ev.prompt)
    if not immediate then
      S.turn_answered = false
    end
    if immediate and S.turns_open > 0 and not S.after_turn then
      S.after_turn = transcript.place_mark(you) -- the turn's answer ends above this exchange
    end
    if immediate then -- its answer goes below it (`finish_turn`), whatever is drawn after it meanwhile
      S.answering[ev.prompt] = {}
    end
    set_header()
  elseif ev.type == "turn_end" then
    if ev.session_id ~= nil and ev.session_id ~= S.header.session and S.left[ev.session_id] then
      return left_turn_end(ev, S.left[ev.session_id])
    end
    finish_turn(ev.stop_reason, ev.error, ev.prompt, ev.kind)
  elseif ev.type == "cancel" and ev.idle then
    M.say("nothing to cancel: no turn is running")
  elseif ev.type == "cancel" then
    M.say("cancelling …")
  elseif ev.type == "session" then
    M.flush()
    M.buffer()
    transcript.release()
    turn_drew_at_end()
    local was = S.header.session
    if not ev.refused then
      S.header.session = ev.id
    end
    if ev.modes then
      S.header.mode = ev.modes.currentModeId
    end
    if ev.resumed then
      -- the session the chat shows, reattached after the server died or was restarted: nothing is
      -- replayed, the transcript above is what the agent has
      S.section = nil
      if S.running == 0 then
        S.header.state = "idle" -- no longer "stopped": the server runs again
      end
      add_lines({ "", string.format("_— session %s resumed: the agent still has everything above —_", ev.id) })
    elseif ev.refused then
      -- a refused load leaves the chat on the session it had (or none), and says so
      S.header.session = ev.current
      come_back(ev.current)
      if S.load_mark then
        transcript.replace_at(S.load_mark, 1, { "# Session " .. ev.id .. " (not loaded)" })
        S.load_mark = nil
      end
      S.section = nil
      local stay = ev.current and ("this chat stays on session " .. ev.current)
        or "no session: the next prompt starts a new one"
      local why = ev.refused
      if ev.busy then -- the ways forward are offered (`init.load`): said in the chat's words, not the protocol's
        stay = stay .. "; take it over here, open a copy, or cancel"
        why = M.busy_text(ev.busy, ev.refused)
      end
      M.say(string.format("could not load session %s: %s — %s", ev.id, why, stay), "error")
    elseif ev.loading then
      -- the lines of the session loaded are drawn again; those of the others stay theirs
      local mine = tostring(ev.id) .. "\0"
      for key in pairs(S.tools) do
        if key:sub(1, #mine) == mine then
          S.tools[key] = nil
        end
      end
      S.section = nil
      S.header.session = ev.id
      local row = add_lines({ "", "# Session " .. ev.id .. " (loading …)" })
      S.load_mark = transcript.place_mark(row + 1)
      leave(was ~= ev.id and was or nil, row + 1)
    elseif ev.loaded then
      M.flush()
      S.section = nil
      if S.load_mark then
        transcript.replace_at(S.load_mark, 1, { "# Session " .. ev.id .. " (loaded)" })
        S.load_mark = nil
      end
      come_back(ev.id)
      add_lines({ "", "_— replayed —_" })
    else
      local row = add_lines({ "", "# Session " .. ev.id })
      leave(was ~= ev.id and was or nil, row + 1)
    end
    set_header()
  elseif ev.type == "new_session" then
    M.flush()
    M.buffer()
    transcript.release()
    turn_drew_at_end()
    local was = S.header.session
    S.header.session = nil
    S.section = nil
    local row = add_lines({ "", "_— new session: it starts with your next prompt —_" })
    leave(was, row + 1)
    set_header()
  elseif ev.type == "exit" then
    M.flush()
    S.exit_shown = S.running > 0 -- the prompts' error answers would only repeat it
    M.buffer()
    local how = ev.signal and ev.signal ~= 0 and ("signal " .. ev.signal) or ("exit code " .. tostring(ev.code))
    local lines = { "", string.format("**agent-server exited (%s)**%s; %s (`:AgentLog` shows its log).", how,
      (ev.during_turn and " during a turn" or "") .. (ev.lost and (": the connection broke (" .. ev.lost .. "), so it was stopped") or ""),
      ev.restarting and "it is started again now" or ((ev.why and ev.why:find("times within", 1, true) and ("not started "
        .. "again: " .. ev.why .. "; ") or "") .. "the next command starts a new one")) }
    local own = #lines
    if ev.stderr and ev.stderr ~= "" then -- its last words (an MCP server's, a model's in them): never the chat's
      local tail = vim.split(ev.stderr:gsub("%s+$", ""), "\n", { plain = true })
      for _, l in ipairs(vim.list_slice(tail, math.max(1, #tail - 14))) do
        lines[#lines + 1] = "    │ " .. l:gsub("\r", "")
      end
    end
    local notes = #lines
    if S.header.session then
      lines[#lines + 1] = ev.restarting and string.format("_It resumes session %s: your prompt and your unsaved "
        .. "buffers stay as they are._", S.header.session)
        or string.format("_The next prompt starts it again and resumes session %s._", S.header.session)
    end
    -- prompts queued behind the turn that died were never run: said, and the last one given back
    local lost = S.queued
    S.queued = {}
    for _, blocks in ipairs(lost) do
      local first = prompt_lines(blocks)[1] or ""
      lines[#lines + 1] = string.format("_Not sent: \"%s\" was queued behind that turn and never ran — ask again._",
        first)
    end
    local back = lost[#lost] and lost[#lost][1]
    if back and back.type == "text" and transcript.prompt_text() == "" then
      vim.schedule(function()
        transcript.set_prompt(back.text)
      end)
    end
    close_open_tools(true) -- killed with the server: not still running
    transcript.release()
    turn_drew_at_end()
    S.answering, S.command_text = {}, {}
    local row = add_lines(lines, own)
    for i = notes + 1, #lines do
      transcript.mark_own(row + i - 1)
    end
    S.section, S.running, S.turns_open = nil, 0, 0
    S.header.state, S.header.session = "stopped", nil
    set_header()
  elseif ev.type == "restart_failed" then
    M.say(string.format("agent-server did not start again (%s): the next prompt tries again (`:AgentLog` shows "
      .. "its log)", tostring(ev.error):gsub("\n", " ")), "error")
  elseif ev.type == "session_lost" then
    M.flush()
    M.buffer()
    if ev.busy then -- the ways forward are offered (`init`): take it over, a copy, or a new session
      M.say(string.format("session %s was not resumed: %s — take it over here, open a copy, or start a new "
        .. "session (the agent would not see what is above)", ev.id, M.busy_text(ev.busy, ev.reason)), "error")
    else
      M.say(string.format("session %s could not be resumed (%s): a new session starts here, and the agent does "
        .. "not see what is above", ev.id, tostring(ev.reason)), "error")
    end
  elseif ev.type == "info" then
    M.say(ev.text, ev.level)
  elseif ev.type == "commands" then
    S.commands = ev.commands -- until a session's `available_commands_update`
  elseif ev.type == "failed" and ev.before_turn and ev.kind == "auth" then
    -- no session could start (no key, no endpoint, no model: a first run): the ways to set it up here
    add_lines({ "_No model is set up for this Neovim's server yet (your prompt waits below). " .. SIGN_IN })
  end
end

-- The tool line at 0-based `row` of the transcript, or nil.
local function tool_at(row)
  for i = #(S.tool_lines or {}), 1, -1 do
    local t = S.tool_lines[i]
    if transcript.mark_row(t.mark) == row then
      return t
    end
  end
end

-- Open a tool call's first location in the window the chat was opened from (or a new one).
local function open_location(t)
  local loc = (t.locations or {})[1]
  if not loc or type(loc.path) ~= "string" then
    return false
  end
  local chat_win = vim.api.nvim_get_current_win()
  vim.cmd("wincmd p")
  if vim.api.nvim_get_current_win() == chat_win then
    vim.cmd("aboveleft new")
  end
  vim.cmd("edit " .. vim.fn.fnameescape(loc.path))
  if type(loc.line) == "number" then
    pcall(vim.api.nvim_win_set_cursor, 0, { math.max(1, loc.line), 0 })
  end
  return true
end

--- `<CR>` in the chat: send from the prompt area, open a tool line's location, else move as usual.
function M.enter()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  if transcript.in_prompt(row) then
    return require("agent_server").send_typed()
  end
  local t = tool_at(row)
  if t and open_location(t) then
    return
  end
  vim.api.nvim_feedkeys(vim.keycode("<CR>"), "n", false)
end

--- Jump to the next (`dir` 1) or previous (-1) turn ("## You") of the transcript.
function M.jump_turn(dir)
  local buf = M.buffer()
  local lines = vim.api.nvim_buf_get_lines(buf, 0, transcript.sep_row(), false)
  local row = vim.api.nvim_win_get_cursor(0)[1]
  local from, to, step = row + 1, #lines, 1
  if dir < 0 then
    from, to, step = math.min(row - 1, #lines), 1, -1
  end
  for i = from, to, step do
    if lines[i] == "## You" and transcript.is_own(i - 1) then
      vim.api.nvim_win_set_cursor(0, { i, 0 })
      return true
    end
  end
  return false
end

--- The open proposal of the tool line under the cursor, else the latest open one.
function M.proposal_here()
  local proposals = require("agent_server.proposals")
  local t = tool_at(vim.api.nvim_win_get_cursor(0)[1] - 1)
  if t then
    for _, p in pairs(proposals.open) do
      if p.tool_call_id == t.id then
        return p
      end
    end
  end
  return proposals.latest()
end

--- Close the chat window (the buffer stays; :AgentChat shows it again).
function M.close()
  local win = vim.api.nvim_get_current_win()
  if not pcall(vim.api.nvim_win_close, win, false) then
    pcall(vim.cmd, "buffer #") -- the last window: show the buffer before it
  end
end

function set_keys(buf)
  local keys = config.chat_keys()
  if not keys then
    return
  end
  local api = require("agent_server")
  local function map(mode, name, fn, desc)
    if keys[name] then
      vim.keymap.set(mode, keys[name], fn, { buffer = buf, desc = "agent-server: " .. desc, nowait = true })
    end
  end
  map("n", "send", M.enter, "send the prompt (on a tool line: open its location)")
  map({ "n", "i" }, "send_insert", function()
    api.send_typed()
  end, "send the prompt")
  map("n", "cancel", api.cancel, "cancel the turn")
  if keys.cancel then
    -- <C-s> sends from insert mode and leaves the user there: <C-c> there cancels a running turn;
    -- with none running the key does what it always does (leaves insert mode)
    vim.keymap.set("i", keys.cancel, function()
      if not require("agent_server.client").busy() then
        return keys.cancel
      end
      vim.schedule(api.cancel)
      return ""
    end, { buffer = buf, expr = true, desc = "agent-server: cancel the running turn", nowait = true })
  end
  map("n", "close", M.close, "close the chat window")
  map("n", "next_turn", function()
    M.jump_turn(1)
  end, "next turn")
  map("n", "prev_turn", function()
    M.jump_turn(-1)
  end, "previous turn")
  map("n", "accept", function()
    api.accept(M.proposal_here())
  end, "accept the proposal under the cursor")
  map("n", "reject", function()
    api.reject(M.proposal_here())
  end, "reject the proposal under the cursor")
  transcript.set_hint(string.format("%s sends%s", keys.send or keys.send_insert or "",
    keys.send_insert and keys.send and (" (" .. keys.send_insert .. " in insert mode)") or ""))
end

-- Whether the cursor is on the prompt area's first line with text (or before any): where a slash
-- command can start (the server reads a prompt as one only when it starts with `/name`).
function first_line()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local sep = transcript.sep_row()
  if row <= sep then
    return false
  end
  for _, l in ipairs(vim.api.nvim_buf_get_lines(0, sep + 1, row, false)) do
    if l:match("%S") then
      return false
    end
  end
  return true
end

-- The values `/mode` and `/model` take (the session's modes, the server's model option), as
-- completion items; nil when the server has not said them.
local function argument_items(name)
  local client = require("agent_server.client")
  local items = {}
  if name == "mode" then
    for _, m in ipairs(((client.state.modes or {}).availableModes) or {}) do
      items[#items + 1] = { word = tostring(m.id), menu = m.name }
    end
  else
    for _, o in ipairs(client.models() or {}) do
      items[#items + 1] = { word = tostring(o.value), menu = o.name }
    end
  end
  return #items > 0 and items or nil
end

--- 'omnifunc' of the chat (<C-x><C-o>): slash commands at the start of the prompt (from the
--- server's `available_commands_update`) and the values of `/mode` and `/model` (the session's
--- modes, the server's model option), `#buffer`, `#file:` (with a path), `#selection`,
--- `#diagnostics`.
function M.complete(findstart, base)
  if findstart == 1 then
    local line = vim.api.nvim_get_current_line()
    local col = vim.api.nvim_win_get_cursor(0)[2]
    local before = line:sub(1, col)
    local name, arg = before:match("^%s*/(%a+)%s+(%S*)$")
    S.argument_of = nil
    if (name == "mode" or name == "model") and first_line() and argument_items(name) then
      S.argument_of = name -- `/mode <id>`, `/model <id>`: its values
      return col - #arg
    end
    local start = before:find("[#/][^%s]*$")
    if not start then
      return -3
    end
    local ch = before:sub(start, start)
    if ch == "/" and (start ~= 1 and not before:sub(1, start - 1):match("^%s*$") or not first_line()) then
      return -3 -- a slash command is the prompt's first word
    end
    if ch == "/" and S.commands == nil then
      -- agent-server lists them in its `initialize` answer; an agent that lists them only with a
      -- session (`available_commands_update`) has none open yet, or the server is still starting
      pcall(vim.api.nvim_echo, { { "agent-server: no slash commands listed yet (agent-server lists them once "
        .. "it has started, another agent with its first session); sending /help shows them" } }, false, {})
      return -3
    end
    return start - 1
  end
  local out = {}
  local of = S.argument_of
  S.argument_of = nil
  if of then
    for _, item in ipairs(argument_items(of) or {}) do
      if vim.startswith(item.word, base) then
        out[#out + 1] = item
      end
    end
  elseif base:sub(1, 1) == "/" then
    for _, c in ipairs(S.commands or {}) do
      local word = "/" .. tostring(c.name)
      if vim.startswith(word, base) then
        out[#out + 1] = { word = word, menu = c.description }
      end
    end
  elseif vim.startswith(base, "#file:") then
    local cwd = config.get().cwd or vim.fn.getcwd()
    local partial = base:sub(7)
    local found = vim.fn.globpath(cwd, partial .. "*", false, true)
    for _, f in ipairs(found) do
      local rel = f:sub(#cwd + 2)
      out[#out + 1] = { word = "#file:" .. rel .. (vim.fn.isdirectory(f) == 1 and "/" or "") }
    end
  else
    for _, name in ipairs(require("agent_server.context").NAMES) do
      if vim.startswith(name, base) then
        out[#out + 1] = { word = name }
      end
    end
  end
  return out
end

--- The state for a statusline: "off" (no server), "idle", "thinking", "running <tool>",
--- "waiting for you" (a proposal or a question).
function M.status()
  local client = require("agent_server.client")
  if not client.pid() then
    return "off"
  end
  if next(require("agent_server.proposals").open) ~= nil or require("agent_server.permissions").waiting() then
    return "waiting for you"
  end
  for _, t in pairs(S.tools) do
    if t.status == "in_progress" or t.status == "pending" then
      return "running " .. tostring(t.title or "a tool")
    end
  end
  if client.busy() or S.header.state == "working" then
    return "thinking"
  end
  return "idle"
end

--- The chat's text (for tests and `--check`).
function M.text()
  M.flush()
  return transcript.text()
end

return M
