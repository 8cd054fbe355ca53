--- The diff view of a proposal: current text against the proposed text, hunk by hunk.
---
--- Each document of a proposal opens in a new tab: left the document's current text (read-only),
--- right the proposed text (editable: what the user types there is what gets accepted), both in
--- `:diffthis`. Every hunk (one `TextEdit`) is an extmark spanning its new text in the proposed
--- buffer, so it follows the user's edits. Accepting a hunk asks `proposals` to apply it and
--- refreshes the left side; rejecting one restores its original text on the right.
---
--- Must never: apply text to a document itself (that is `proposals`), or leave a proposal
--- unanswered when its view is closed (closing is a reject, answered at once).
local proposals = require("agent_server.proposals")
local text = require("agent_server.text")

local M = {}

local ns = vim.api.nvim_create_namespace("agent_server_diff")

--- view state per proposed buffer: { proposal, doc, cur_buf, prop_buf, tab, marks = {[hunk]=id} }
local views = {}

local function scratch(name, lines, ft, modifiable)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "hide" -- wiped by us once hidden (a hidden view is a closed view)
  vim.bo[buf].swapfile = false
  vim.bo[buf].buftype = "nofile"
  pcall(vim.api.nvim_buf_set_name, buf, name)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  if ft then
    vim.bo[buf].filetype = ft
  end
  vim.bo[buf].modifiable = modifiable
  vim.bo[buf].modified = false
  return buf
end

local function set_lines_of(buf, s)
  local lines = text.split(s)
  local was = vim.bo[buf].modifiable
  vim.bo[buf].modifiable = true
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  vim.bo[buf].modifiable = was
  vim.bo[buf].modified = false
end

-- Place a hunk's extmark over [b0, b1) of the proposed text.
local function mark_hunk(view, h, idx, b0, b1, n, total)
  local nlines = vim.api.nvim_buf_line_count(view.prop_buf)
  local function clamp(row, col)
    if row >= nlines then
      local last = vim.api.nvim_buf_get_lines(view.prop_buf, nlines - 1, nlines, false)[1] or ""
      return nlines - 1, #last, true
    end
    return row, col, false
  end
  local r0, c0 = idx.rowcol(b0)
  local r1, c1 = idx.rowcol(b1)
  local after_eof
  r0, c0, after_eof = clamp(r0, c0)
  local ends_eol
  r1, c1, ends_eol = clamp(r1, c1)
  h.view = { lead_nl = after_eof and b1 > b0, trail_nl = ends_eol and not after_eof }
  view.marks[h] = vim.api.nvim_buf_set_extmark(view.prop_buf, ns, r0, c0, {
    end_row = r1,
    end_col = c1,
    right_gravity = false,
    end_right_gravity = true,
    sign_text = "▌",
    sign_hl_group = "DiffChange",
    virt_text = { { string.format(" hunk %d/%d ", n, total), "Comment" } },
    virt_text_pos = "eol",
  })
end

--- The text of `h` as the proposed buffer holds it now (the user may have edited it).
local function hunk_text(view, h)
  local m = vim.api.nvim_buf_get_extmark_by_id(view.prop_buf, ns, view.marks[h], { details = true })
  if not m or #m == 0 then
    return h.new
  end
  local lines = vim.api.nvim_buf_get_text(view.prop_buf, m[1], m[2], m[3].end_row, m[3].end_col, {})
  local s = table.concat(lines, "\n")
  if h.view.lead_nl then
    s = "\n" .. s
  end
  if h.view.trail_nl then
    s = s .. "\n"
  end
  return s
end

local function hunk_rows(view, h)
  local m = vim.api.nvim_buf_get_extmark_by_id(view.prop_buf, ns, view.marks[h], { details = true })
  local last = m[3].end_row
  if m[3].end_col == 0 and last > m[1] then
    last = last - 1
  end
  return m[1], last
end

local function pending(view)
  local out = {}
  for _, h in ipairs(view.doc.hunks) do
    if h.state == "pending" and view.marks[h] then
      out[#out + 1] = h
    end
  end
  return out
end

local function forget_mark(view, h)
  if view.marks[h] then
    pcall(vim.api.nvim_buf_del_extmark, view.prop_buf, ns, view.marks[h])
  end
end

local function diffupdate(view)
  for _, win in ipairs({ view.cur_win, view.prop_win }) do
    if vim.api.nvim_win_is_valid(win) then
      vim.api.nvim_win_call(win, function()
        vim.cmd("diffupdate")
      end)
    end
  end
end

local function refresh(view)
  if vim.api.nvim_buf_is_valid(view.cur_buf) then
    set_lines_of(view.cur_buf, proposals.accepted_text(view.doc))
  end
  diffupdate(view)
end

local function set_keymaps(view, buf)
  local keys = require("agent_server.config").get().keymaps
  if not keys then
    return
  end
  local api = require("agent_server")
  local function map(name, fn, desc)
    if keys[name] then
      vim.keymap.set("n", keys[name], fn, { buffer = buf, desc = desc, nowait = true })
    end
  end
  map("accept", api.accept, "agent-server: accept the whole proposal")
  map("reject", api.reject, "agent-server: reject the whole proposal")
  map("accept_hunk", api.accept_hunk, "agent-server: accept the hunk under the cursor")
  map("reject_hunk", api.reject_hunk, "agent-server: reject the hunk under the cursor")
  map("next_hunk", function()
    M.jump(1)
  end, "agent-server: next hunk")
  map("prev_hunk", function()
    M.jump(-1)
  end, "agent-server: previous hunk")
  map("close", function()
    M.close_current()
  end, "agent-server: close the proposal (reject)")
end

--- Whether showing a proposal now must leave the cursor where it is: the user is typing (insert,
--- replace or terminal mode, anywhere) or is in the chat (`chat_buf`). Entering the view then
--- would take the keyboard: the next prompt typed would land in the proposed text.
local function user_is_typing(chat_buf)
  local mode = vim.api.nvim_get_mode().mode
  return mode:find("^[iRt]") ~= nil or (chat_buf ~= nil and vim.api.nvim_get_current_buf() == chat_buf)
end

--- Open the view of every document of `proposal` (one tab each). The cursor goes to the proposed
--- text, unless the user is typing or in the chat (`chat_buf`): then the tabs open and the cursor
--- and mode stay where they were; so too with `behind` (a session the chat does not show). Returns the
--- first view's tab number and whether it was entered.
function M.show(proposal, chat_buf, behind)
  local stay = behind or user_is_typing(chat_buf)
  local from_tab, from_win = vim.api.nvim_get_current_tabpage(), vim.api.nvim_get_current_win()
  local first_tab
  for _, doc in ipairs(proposal.docs) do
    local ft = vim.filetype.match({ filename = doc.path }) or ""
    local proposed = proposals.proposed_text(doc)
    local tag = string.format("agent-server://proposal/%d/", proposal.id)
    vim.cmd("tabnew")
    local tab = vim.api.nvim_get_current_tabpage()
    local placeholder = vim.api.nvim_get_current_buf()
    local view = { proposal = proposal, doc = doc, tab = tab, marks = {} }
    view.cur_buf = scratch(tag .. "current/" .. doc.name, text.split(proposals.accepted_text(doc)), ft, false)
    view.prop_buf = scratch(tag .. "proposed/" .. doc.name, text.split(proposed), ft, true)
    view.cur_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(view.cur_win, view.cur_buf)
    if vim.api.nvim_buf_is_valid(placeholder) and placeholder ~= view.cur_buf then
      pcall(vim.api.nvim_buf_delete, placeholder, { force = true })
    end
    vim.cmd("diffthis")
    vim.cmd("rightbelow vsplit")
    view.prop_win = vim.api.nvim_get_current_win()
    vim.api.nvim_win_set_buf(view.prop_win, view.prop_buf)
    vim.cmd("diffthis")
    vim.wo[view.prop_win].signcolumn = "yes"
    local idx = text.index(proposed)
    local spans = proposals.proposed_spans(doc)
    for n, h in ipairs(doc.hunks) do
      mark_hunk(view, h, idx, spans[h][1], spans[h][2], n, #doc.hunks)
    end
    views[view.prop_buf] = view
    views[view.cur_buf] = view
    doc.view = view
    for _, b in ipairs({ view.cur_buf, view.prop_buf }) do
      set_keymaps(view, b)
      vim.api.nvim_create_autocmd({ "BufHidden", "BufWipeout", "BufUnload" }, {
        buffer = b,
        once = true,
        callback = function()
          views[b] = nil
          -- closing the view without choosing: a reject, answered at once (on the next tick: a
          -- window may not be closed from inside the command that is closing one)
          vim.schedule(function()
            if not proposal.answered then
              for _, d in ipairs(proposal.docs) do
                proposals.reject(proposal, d)
              end
            end
          end)
        end,
      })
    end
    first_tab = first_tab or vim.api.nvim_tabpage_get_number(tab)
    vim.api.nvim_set_current_win(view.prop_win)
    local first = pending(view)[1]
    if first then
      local r = hunk_rows(view, first)
      pcall(vim.api.nvim_win_set_cursor, view.prop_win, { r + 1, 0 })
    end
    vim.api.nvim_echo({ { string.format("agent-server: %s — %d hunk(s)%s. :AgentAccept / :AgentReject, "
      .. ":AgentAcceptHunk / :AgentRejectHunk, ]h [h", proposal.label, #doc.hunks,
      stay and string.format(" in tab %d", vim.api.nvim_tabpage_get_number(tab)) or ""), "MoreMsg" } }, false, {})
  end
  if stay and vim.api.nvim_win_is_valid(from_win) then
    -- back where the user was typing, in the mode they were in (switching windows keeps the mode)
    vim.api.nvim_set_current_tabpage(from_tab)
    vim.api.nvim_set_current_win(from_win)
  end
  return first_tab, not stay
end

--- The user's edits of other lines were merged (`proposals.hooks.merged`): the proposed pane goes
--- from `old` to `new` line by line, its pending hunks are marked again and the current pane shows
--- the document. False when the pane holds other text than `old` (the user edited it): not merged.
function M.merged(proposal, doc, old, new)
  local view = doc.view
  if not view or not vim.api.nvim_buf_is_valid(view.prop_buf) then
    return true
  end
  if not vim.deep_equal(vim.api.nvim_buf_get_lines(view.prop_buf, 0, -1, false), (text.split(old))) then
    return false
  end
  local was = vim.bo[view.prop_buf].modifiable
  vim.bo[view.prop_buf].modifiable = true
  text.set_buffer_text(view.prop_buf, new)
  vim.bo[view.prop_buf].modifiable = was
  vim.bo[view.prop_buf].modified = false
  local idx, spans = text.index(new), proposals.review_spans(doc)
  for n, h in ipairs(doc.hunks) do
    if view.marks[h] and spans[h] then
      forget_mark(view, h)
      mark_hunk(view, h, idx, spans[h][1], spans[h][2], n, #doc.hunks)
    end
  end
  refresh(view)
  return true
end

--- What made `doc` stale, in words: "you changed a.py" (in the editor), else the rule's reason with
--- the file's name ("a.py changed on disk", "a.py was deleted on disk").
function M.stale_what(doc, why)
  if not why or why:find("in the editor", 1, true) then
    return "you changed " .. doc.name
  end
  why = why:gsub("^the file ", ""):gsub(" since the agent read it.*$", "")
  return why:sub(1, #doc.name) == doc.name and why or (doc.name .. " " .. why)
end

local function winbar(win, s)
  if vim.api.nvim_win_is_valid(win) then
    vim.wo[win].winbar = s and ("%#WarningMsg#" .. s:gsub("%%", "%%%%")) or ""
  end
end

--- While `doc` is stale its view's current pane shows the text it holds now (the user's), not the
--- text the agent read; `proposals` calls this on every change of a stale document.
function M.current(proposal, doc)
  local view = doc.view
  if view and doc.stale and vim.api.nvim_buf_is_valid(view.cur_buf) then
    local now = proposals.current_text(doc)
    if now then
      set_lines_of(view.cur_buf, now)
      diffupdate(view)
    end
  end
end

--- Stale said at once (`proposals.hooks.stale`): both panes of each view of `proposal` get a
--- winbar saying so and the current pane shows the document's current text (or, when the text is
--- back to what the agent read, the winbars are cleared and the pane shows that text again); the
--- echo area says it.
function M.stale(proposal, doc, stale, why)
  local view = doc.view
  local what = M.stale_what(doc, why)
  if view then
    winbar(view.prop_win, stale and ("⚠ stale: " .. what .. " — accepting is refused. "
      .. (proposals.is_restore(proposal) and proposals.restore_way(proposal)
        or ":AgentReject, or :AgentAskAgain to have the agent redo it on the current text")))
    winbar(view.cur_win, stale and ("⚠ stale: " .. doc.name .. " as it is now (" .. what .. ")"))
    if stale then
      M.current(proposal, doc)
    else
      refresh(view)
    end
  end
  pcall(vim.api.nvim_echo, { { "agent-server: " .. (stale and ("stale: " .. what
    .. " while its proposal waited — " .. (proposals.is_restore(proposal) and proposals.restore_way(proposal)
      or ":AgentAskAgain asks the agent to redo it on the current text"))
    or (doc.name .. " holds the text the agent read again: the proposal can be accepted")),
    stale and "WarningMsg" or "MoreMsg" } }, true, {})
end

--- Close the views of `proposal` (after it was answered); `outcome` (a line saying how it ended)
--- replaces the proposal's hint in the echo area.
function M.close(proposal, outcome)
  if outcome then
    pcall(vim.api.nvim_echo, { { "agent-server: " .. outcome } }, true, {})
  end
  for _, doc in ipairs(proposal.docs) do
    local view = doc.view
    if view then
      doc.view = nil
      for _, win in ipairs({ view.prop_win, view.cur_win }) do
        if vim.api.nvim_win_is_valid(win) then
          if #vim.api.nvim_list_wins() > 1 then
            pcall(vim.api.nvim_win_close, win, true)
          end
        end
      end
      vim.schedule(function() -- not from inside the autocmd of a buffer being hidden
        for _, b in ipairs({ view.prop_buf, view.cur_buf }) do
          if vim.api.nvim_buf_is_valid(b) then
            pcall(vim.api.nvim_buf_delete, b, { force = true })
          end
        end
      end)
    end
  end
end

--- The view the cursor is in, else the view of the latest open proposal (`proposal`: of that one).
local function current_view(proposal)
  if proposal then
    for _, doc in ipairs(proposal.docs) do
      if doc.view and not proposal.answered then
        return doc.view, false
      end
    end
    return nil
  end
  local view = views[vim.api.nvim_get_current_buf()]
  if view and not view.proposal.answered then
    return view, true
  end
  local p = proposals.latest()
  if p then
    for _, doc in ipairs(p.docs) do
      if doc.view then
        return doc.view, false
      end
    end
  end
end

--- The pending hunk under the cursor (in the proposed window), else the first pending hunk.
local function hunk_at_cursor(view, in_view)
  local list = pending(view)
  if in_view and vim.api.nvim_get_current_buf() == view.prop_buf then
    local row = vim.api.nvim_win_get_cursor(0)[1] - 1
    for _, h in ipairs(list) do
      local r0, r1 = hunk_rows(view, h)
      if row >= r0 and row <= r1 then
        return h
      end
    end
    return nil
  end
  return list[1]
end

local function buffer_final(view)
  local lines = vim.api.nvim_buf_get_lines(view.prop_buf, 0, -1, false)
  local s = table.concat(lines, "\n")
  local empty = #lines == 1 and lines[1] == ""
  if proposals.proposed_text(view.doc):sub(-1) == "\n" and not empty then
    s = s .. "\n"
  end
  return s
end

--- Accept every pending hunk of the proposal in view (with the user's edits).
---@return boolean|nil ok, string|nil err
function M.accept_all(proposal)
  local view = current_view(proposal)
  if not view then
    return nil, "no open proposal"
  end
  local proposal = view.proposal
  for _, doc in ipairs(proposal.docs) do
    local v = doc.view
    if v and not proposal.answered then
      local texts = {}
      for _, h in ipairs(pending(v)) do
        texts[h] = hunk_text(v, h)
      end
      proposals.accept_all(proposal, doc, texts, buffer_final(v))
    end
  end
  return true
end

--- Reject the whole proposal in view.
function M.reject_all(proposal)
  local view = current_view(proposal)
  if not view then
    return nil, "no open proposal"
  end
  for _, doc in ipairs(view.proposal.docs) do
    proposals.reject(view.proposal, doc)
  end
  return true
end

-- A hunk was decided and others wait: the cursor stays where it is (as gitsigns' stage_hunk leaves
-- it), so `]h` goes to the next pending hunk; the echo area says how many are left.
local function decided(view, how)
  local left = #pending(view)
  pcall(vim.api.nvim_echo, { { string.format("agent-server: hunk %s — %d pending; ]h [h move to the next / "
    .. "previous one", how, left), "MoreMsg" } }, false, {})
end

--- Accept the hunk under the cursor (the cursor does not move).
function M.accept_hunk()
  local view, in_view = current_view()
  if not view then
    return nil, "no open proposal"
  end
  local h = hunk_at_cursor(view, in_view)
  if not h then
    return nil, "no pending hunk under the cursor"
  end
  local t = hunk_text(view, h)
  local proposal = view.proposal
  if proposals.accept_hunks(proposal, view.doc, { [h] = t }) and not proposal.answered then
    forget_mark(view, h)
    refresh(view)
    decided(view, "accepted")
  end
  return true
end

--- Reject the hunk under the cursor (its original text comes back on the right; the cursor stays
--- on it).
function M.reject_hunk()
  local view, in_view = current_view()
  if not view then
    return nil, "no open proposal"
  end
  local h = hunk_at_cursor(view, in_view)
  if not h then
    return nil, "no pending hunk under the cursor"
  end
  local m = vim.api.nvim_buf_get_extmark_by_id(view.prop_buf, ns, view.marks[h], { details = true })
  local old = h.old
  if h.view.trail_nl and old:sub(-1) == "\n" then
    old = old:sub(1, -2)
  end
  if h.view.lead_nl and old:sub(1, 1) == "\n" then
    old = old:sub(2)
  end
  forget_mark(view, h)
  local cursor = vim.api.nvim_win_is_valid(view.prop_win) and vim.api.nvim_win_get_cursor(view.prop_win)
  pcall(vim.api.nvim_buf_set_text, view.prop_buf, m[1], m[2], m[3].end_row, m[3].end_col, vim.split(old, "\n", { plain = true }))
  if cursor and cursor[1] - 1 >= m[1] and cursor[1] - 1 <= m[3].end_row then
    -- the cursor was in the hunk: it stays on it (its text, now the original, may be shorter)
    pcall(vim.api.nvim_win_set_cursor, view.prop_win, { m[1] + 1, 0 })
  end
  proposals.reject(view.proposal, view.doc, h)
  if not view.proposal.answered then
    refresh(view)
    decided(view, "rejected")
  end
  return true
end

--- Move the cursor to the next (`dir` 1) or previous (-1) pending hunk of the view.
function M.jump(dir)
  local view = views[vim.api.nvim_get_current_buf()]
  if not view or vim.api.nvim_get_current_buf() ~= view.prop_buf then
    view = current_view()
    if not view or not vim.api.nvim_win_is_valid(view.prop_win) then
      return
    end
    vim.api.nvim_set_current_win(view.prop_win)
  end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local rows = {}
  for _, h in ipairs(pending(view)) do
    rows[#rows + 1] = (hunk_rows(view, h))
  end
  if #rows == 0 then
    return
  end
  local target
  if dir > 0 then
    for _, r in ipairs(rows) do
      if r > row then
        target = r
        break
      end
    end
    target = target or rows[1]
  else
    for i = #rows, 1, -1 do
      if rows[i] < row then
        target = rows[i]
        break
      end
    end
    target = target or rows[#rows]
  end
  vim.api.nvim_win_set_cursor(0, { target + 1, 0 })
end

--- Close the view the cursor is in (a reject of what is still pending).
function M.close_current()
  local view = views[vim.api.nvim_get_current_buf()]
  if view then
    for _, doc in ipairs(view.proposal.docs) do
      proposals.reject(view.proposal, doc)
    end
  end
end

return M
