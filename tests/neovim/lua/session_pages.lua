-- `session/list` pages in a real Neovim (`nvim --clean -l`, run by test_units.py), against a fake
-- server (the client's rpc replaced by a table answering from a script): the client follows
-- `nextCursor` to the last page and keeps the server's order; a misbehaving server (a cursor sent
-- again, cursors without end, a later page failing) ends the walk with a note that :AgentSessions
-- shows as a warning above the picker. (The plugin offered only the first 50 sessions.)
vim.opt.rtp:prepend(assert(os.getenv("AGENT_SERVER_PLUGIN")))
local check = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "check.lua"))
local eq = check.eq

local client = require("agent_server.client")
require("agent_server.config").setup({ cwd = "/w" })

local function ids(from, to)
  local out = {}
  for i = from, to do
    out[#out + 1] = { sessionId = string.format("s%03d", i), title = "t" .. i }
  end
  return out
end

--- A fake server: `answer(params, n)` gives the n-th `session/list` answer as `result` or `nil, err`.
local function serve(answer)
  local asked = {}
  client.state.rpc = {
    request = function(_, method, params, cb)
      asked[#asked + 1] = vim.deepcopy(params)
      assert(method == "session/list", method)
      local result, err = answer(params, #asked)
      vim.schedule(function()
        cb(err, result)
      end)
    end,
  }
  client.state.initialized = true
  return asked
end

local function list()
  local got
  client.list_sessions(function(err, sessions, note)
    got = { err = err, sessions = sessions, note = note }
  end)
  assert(vim.wait(check.HANG, function()
    return got ~= nil
  end), "list_sessions never answered")
  return got
end

local function session_ids(sessions)
  return vim.tbl_map(function(s)
    return s.sessionId
  end, sessions or {})
end

-- sessions picker reaches sessions past the first page: 63 sessions, 50 + 13
local asked = serve(function(params)
  if params.cursor == nil then
    return { sessions = ids(1, 50), nextCursor = "after-50" }
  end
  if params.cursor == "after-50" then
    return { sessions = ids(51, 63) } -- no nextCursor: the last page
  end
  return nil, { code = -32602, message = "invalid cursor" }
end)
local got = list()
eq(got.err, nil, "two pages: no error")
eq(got.note, nil, "two pages: nothing to say")
eq(session_ids(got.sessions), session_ids(ids(1, 63)), "all 63 sessions, newest first as the server sent them")
eq(asked, { { cwd = "/w" }, { cwd = "/w", cursor = "after-50" } }, "the second page asked with the first page's cursor")

-- a JSON null cursor (decoded as nil) or an empty one ends the walk like a missing one
serve(function()
  return { sessions = ids(1, 3), nextCursor = "" }
end)
got = list()
eq({ #got.sessions, got.note }, { 3, nil }, "an empty cursor is the last page")

-- a server that sends the same cursor again: stopped, each session once, said
asked = serve(function(params)
  return { sessions = params.cursor and ids(50, 60) or ids(1, 50), nextCursor = "same" }
end)
got = list()
eq(#asked, 2, "a repeated cursor: two pages asked, not more")
eq(session_ids(got.sessions), session_ids(ids(1, 60)), "a repeated session is listed once, where it came first")
eq(got.note and got.note:find("cursor again", 1, true) ~= nil, true, "the repeated cursor is said: " .. tostring(got.note))

-- a server whose cursors never end: stopped at the page cap, said
local cap = client.MAX_SESSION_PAGES
client.MAX_SESSION_PAGES = 4
asked = serve(function(_, n)
  return { sessions = ids(n * 10, n * 10), nextCursor = "c" .. n }
end)
got = list()
client.MAX_SESSION_PAGES = cap
eq(#asked, 4, "endless cursors: the cap's pages asked, not more")
eq(session_ids(got.sessions), { "s010", "s020", "s030", "s040" }, "the pages before the cap are kept")
eq(got.note and got.note:find("stopped after 4 pages", 1, true) ~= nil, true, "the cap is said: " .. tostring(got.note))
eq(cap, 100, "the cap: 100 pages (5000 sessions)")

-- a later page failing: the pages before it, and the failure said; a first page failing is the error
serve(function(params)
  if params.cursor then
    return nil, { code = -32603, message = "disk on fire" }
  end
  return { sessions = ids(1, 50), nextCursor = "next" }
end)
got = list()
eq(#got.sessions, 50, "a failed second page keeps the first")
eq(got.note and got.note:find("page 2 failed (disk on fire)", 1, true) ~= nil, true, "the failure is said: " .. tostring(got.note))
serve(function()
  return nil, { code = -32602, message = "bad cwd" }
end)
got = list()
eq({ got.err, got.sessions }, { "bad cwd", nil }, "a failed first page is the error")

-- :AgentSessions: the picker gets every page; the note comes first as a warning
local shown, notes = nil, {}
vim.ui.select = function(items)
  shown = items
end
vim.notify = function(msg, level)
  notes[#notes + 1] = { msg, level }
end
serve(function(params)
  return params.cursor and { sessions = ids(51, 63), nextCursor = "after-50" } or
    { sessions = ids(1, 50), nextCursor = "after-50" }
end)
require("agent_server").sessions()
assert(vim.wait(check.HANG, function()
  return shown ~= nil
end), "the picker never opened")
eq(session_ids(shown), session_ids(ids(1, 63)), "the picker offers all 63")
eq(#notes == 1 and notes[1][2] == vim.log.levels.WARN and notes[1][1]:find("cursor again", 1, true) ~= nil, true,
  "the repeated cursor is shown as a warning: " .. vim.inspect(notes))

check.done("session_pages")
