--- Edit proposals (`_agent_server/apply_workspace_edit`): the model, the stale rule, applying
--- what was accepted, and the answer.
---
--- A proposal holds one `doc` per `TextDocumentEdit`; a doc keeps the text the edits were computed
--- on (`base`, "\n" line breaks) and its hunks (one per `TextEdit`) with their original byte spans.
--- Whatever is accepted — all at once or hunk by hunk — the document is made to hold
--- `base` with every accepted hunk applied (bottom up, spans from the original text), so later
--- hunks land at their original anchors, never at stale line numbers. A hunk's text may be the
--- user's edit of it; `applied` then carries exactly that text.
---
--- Stale rule (docs/protocol.md): stale when the document's version differs from the expected one
--- **and** the sha256 of its text differs from the expected hash; with no version (`null`), the hash
--- alone decides. Checked on arrival and again right before each application.
---
--- Must never: draw anything (the `diff` view asks this module), apply on top of fresh keystrokes,
--- or answer a proposal twice.
local buffers = require("agent_server.buffers")
local text = require("agent_server.text")

local M = {}

---@type table<integer, table> open proposals by local id
M.open = {}
local next_id = 1
local unwatch -- below: stops a proposal's file watchers

--- Hooks set by the plugin: `show(proposal)` opens the view, `close(proposal)` closes it,
--- `say(text, session_id)` writes to the chat (in the part of the proposal's session).
M.hooks = {
  show = function() end,
  close = function() end,
  say = function() end,
  stale = function() end, -- stale(proposal, doc, is_stale, why): said at once, while the proposal is shown
  current = function() end, -- current(proposal, doc): a stale document changed again
  -- merged(proposal, doc, old, new): the user's edits of other lines were merged; the view shows `new`
  -- where it showed `old` (false: it shows other text — the user edited it —, the merge is undone)
  merged = function()
    return true
  end,
}

--- The last proposal answered (for "ask the agent again" after it was closed).
M.last_answered = nil

local function uri_to_path(uri)
  return vim.uri_to_fname(uri)
end

-- The document as it is now: `{ buf?, text, eol, wire, bom, version? }` (`wire`: the text hashed).
local function current(doc)
  local buf = buffers.find(doc.path)
  if buf then
    local d = text.buffer_doc(buf)
    local wire = text.wire(d.text, d.eol)
    return { buf = buf, text = d.text, eol = d.eol, wire = wire, bom = d.bom, version = vim.b[buf].changedtick }
  end
  local raw = buffers.read_disk(doc.path)
  if raw then
    local d = text.from_raw(raw)
    return { text = d.text, eol = d.eol, wire = d.body, bom = d.bom }
  end
  return nil
end

--- Whether `doc` changed since it was read (or since our last application to it).
--- The reason says where it changed: in the editor (a buffer holds it) or on disk. `on_disk`: also
--- the file under a buffer that holds it (read from disk: right before applying, not per keystroke).
function M.is_stale(doc, on_disk)
  if doc.existed and (not doc.create or doc.created) and not vim.uv.fs_stat(doc.path) then
    -- deleted on disk while a buffer still holds it: applying and saving would re-create it
    return true, doc.name .. " was deleted on disk since the agent read it"
  end
  local cur = current(doc)
  if not cur then
    return not doc.create or doc.created, doc.name .. " was deleted on disk since the agent read it"
  end
  local version_differs = doc.expect_version == nil or cur.version ~= doc.expect_version
  if version_differs and text.sha256(cur.wire) ~= doc.expect_hash then
    return true, cur.buf and "the file changed in the editor since the agent read it"
      or "the file changed on disk since the agent read it"
  end
  if on_disk and cur.buf and doc.disk_hash then
    -- another program wrote the file under the buffer: saving the buffer would write over it
    local raw = buffers.read_disk(doc.path)
    if raw and text.sha256(raw) ~= doc.disk_hash then
      if vim.bo[cur.buf].modified or (raw ~= text.buffer_bytes(cur.buf, false) and raw ~= text.buffer_bytes(cur.buf, true)) then
        return true, "the file changed on disk since the agent read it (the editor's buffer still holds the old text)"
      end
      -- the user's own `:w` of the buffer (its text, checked above as the proposal's or merged):
      -- the disk holds what the buffer holds; accepting now saves the agent's change like a clean buffer's
      doc.disk_hash, doc.was_dirty = text.sha256(raw), false
    end
  end
  return false
end

--- The text `doc` holds now (its buffer's, else the file's), nil when it is gone.
function M.current_text(doc)
  local cur = current(doc)
  return cur and cur.text
end

local function parse_doc(change, params, encoding)
  local uri = change.textDocument and change.textDocument.uri
  if type(uri) ~= "string" or type(change.edits) ~= "table" then
    return nil, "a TextDocumentEdit without a uri or edits"
  end
  local path = uri_to_path(uri)
  local doc = {
    uri = uri,
    path = path,
    name = vim.fn.fnamemodify(path, ":~:."),
    version = change.textDocument.version, -- nil for JSON null
    base_hash = (params.baseHashes or {})[uri],
    encoding = encoding,
    hunks = {},
  }
  return doc
end

local function init_doc(doc, create)
  doc.create = create or false
  local loaded = buffers.find(doc.path)
  local bad = loaded and buffers.buffer_encoding_error(loaded, doc.path)
  if not bad and not loaded then
    local raw = buffers.read_disk(doc.path)
    bad = raw and text.utf8_invalid(raw) and buffers.not_utf8_error(doc.path, nil, raw)
  end
  if bad then -- applying and saving would re-encode every other byte of the file
    return false, bad.message
  end
  local cur = current(doc)
  if doc.create and not cur then
    cur = { text = "", eol = "\n", wire = "" }
  elseif doc.create and cur then
    return false, doc.name .. " already exists"
  end
  if not cur and not vim.uv.fs_stat(doc.path) then -- the agent read it: it left the disk since
    return false, doc.name .. " was deleted on disk since the agent read it", "stale"
  elseif not cur then
    return false, "cannot read " .. doc.name
  end
  doc.existed = vim.uv.fs_stat(doc.path) ~= nil -- a file deleted meanwhile is stale, even when a buffer holds it
  -- outside already (the server's policy let it through): else leading outside when written is refused
  doc.outside_at_arrival = buffers.leads_outside(doc.path) ~= nil
  doc.real_at_arrival = buffers.real_path(doc.path) -- where it leads: it must lead there when written
  local raw = doc.existed and buffers.find(doc.path) and buffers.read_disk(doc.path)
  doc.disk_hash = raw and text.sha256(raw) or nil -- the file under its buffer, as the agent's proposal found it
  doc.expect_version = doc.version
  doc.expect_hash = doc.base_hash or text.sha256(cur.wire)
  if not doc.create then
    local stale, why = M.is_stale(doc)
    if stale then
      return false, why, "stale"
    end
  end
  doc.base, doc.eol, doc.bom = cur.text, cur.eol, cur.bom
  doc.was_loaded = cur.buf ~= nil
  doc.was_dirty = cur.buf ~= nil and vim.bo[cur.buf].modified
  local idx = text.lsp_index(doc.base, doc.eol) -- LSP lines: a lone "\r" ends one
  for i, e in ipairs(doc.raw_edits) do
    local r = e.range
    local a0 = idx.offset(r.start.line, r.start.character, doc.encoding)
    local a1 = idx.offset(r["end"].line, r["end"].character, doc.encoding)
    doc.hunks[i] = {
      index = i,
      a0 = a0,
      a1 = math.max(a0, a1),
      range = r,
      old = doc.base:sub(a0 + 1, math.max(a0, a1)),
      new = text.to_doc(e.newText or "", doc.eol),
      state = "pending",
    }
  end
  table.sort(doc.hunks, function(x, y)
    return x.a0 < y.a0
  end)
  for i, h in ipairs(doc.hunks) do
    if i > 1 and h.a0 < doc.hunks[i - 1].a1 then
      return false, "the proposal's edits overlap"
    end
  end
  return true
end

--- `base` with each hunk's text `pick(h)` in place of its range; a hunk `pick` gives `nil` is left out.
local function picked_text(doc, pick)
  local spans = {}
  for _, h in ipairs(doc.hunks) do
    local t = pick(h)
    if t then
      spans[#spans + 1] = { h.a0, h.a1, t }
    end
  end
  return text.apply_spans(doc.base, spans)
end

--- Where each hunk's text `pick(h)` sits in `picked_text(doc, pick)`: `{ [hunk] = {b0, b1} }` byte
--- offsets (a hunk `pick` gives `nil` has none).
local function picked_spans(doc, pick)
  local out, delta = {}, 0
  for _, h in ipairs(doc.hunks) do
    local t = pick(h)
    if t then
      out[h] = { h.a0 + delta, h.a0 + delta + #t }
      delta = delta + #t - (h.a1 - h.a0)
    end
  end
  return out
end

local function proposed(h)
  return h.new
end

local function accepted(h)
  return h.state == "accepted" and h.text or nil
end

local function reviewed(h)
  if h.state ~= "rejected" then
    return h.state == "accepted" and h.text or h.new
  end
end

--- The text of `doc` with all hunks applied (what the view shows as proposed).
function M.proposed_text(doc)
  return picked_text(doc, proposed)
end

--- Where each hunk's new text sits in `M.proposed_text(doc)`: `{ [hunk] = {b0, b1} }` byte offsets.
function M.proposed_spans(doc)
  return picked_spans(doc, proposed)
end

--- The text `doc` holds once every accepted hunk (with its accepted text) is applied to `base`.
function M.accepted_text(doc)
  return doc.final or picked_text(doc, accepted)
end

--- What the review shows as proposed: `base` with the accepted hunks (their accepted text) and the
--- pending ones (their new text); rejected hunks are left out.
function M.review_text(doc)
  return picked_text(doc, reviewed)
end

--- Where each hunk that is not rejected sits in `M.review_text(doc)`: `{ [hunk] = {b0, b1} }`.
function M.review_spans(doc)
  return picked_spans(doc, reviewed)
end

-- The changes from "\n" text `old` to `new`, one per hunk of a line diff: `{u0, u1, text, first, count,
-- n0, n1}`, the byte span of `old` it replaces, its new text, the lines of `old` it replaces (`count` 0:
-- lines inserted before line `first`; 0-based), and the span of the bytes that differ.
local function changed_lines(old, new)
  local out = {}
  local oi, ni = text.index(old), text.index(new)
  for _, d in ipairs(text.diff(old, new, { result_type = "indices", algorithm = "histogram" }) or {}) do
    local sa, ca, sb, cb = unpack(d)
    local a0, b0 = ca == 0 and sa or sa - 1, cb == 0 and sb or sb - 1
    local s0, s1 = oi.offset(a0, 0, "utf-8"), oi.offset(a0 + ca, 0, "utf-8")
    local t0, t1 = ni.offset(b0, 0, "utf-8"), ni.offset(b0 + cb, 0, "utf-8")
    -- the bytes that differ: typing at a line's end is not its line break, joining two lines is
    local n0, n1, m0, m1 = s0, s1, t0, t1
    while n0 < n1 and m0 < m1 and old:byte(n0 + 1) == new:byte(m0 + 1) do
      n0, m0 = n0 + 1, m0 + 1
    end
    while n1 > n0 and m1 > m0 and old:byte(n1) == new:byte(m1) do
      n1, m1 = n1 - 1, m1 - 1
    end
    out[#out + 1] = { s0, s1, new:sub(t0 + 1, t1), a0, ca, n0, n1 }
  end
  return out
end

-- The lines a hunk at the byte span [b0, b1) of the text `idx` indexes changes, first and last (a span
-- that ends with a line break ends on that line; lines inserted before a line neighbour both lines).
local function hunk_lines(idx, b0, b1)
  local p0 = idx.position(b0, "utf-8")
  if b1 == b0 then
    return p0.character == 0 and p0.line - 1 or p0.line, p0.line
  end
  local last = idx.text:sub(b1, b1) == "\n" and b1 - 1 or b1
  return p0.line, idx.position(last, "utf-8").line
end

local fold -- below: `base` moved onto the user's text

--- Merge the user's edits of other lines (docs/protocol.md "Merged with the user's edits of other
--- lines"): when the buffer of `doc` differs from what it must hold only in lines no accepted or
--- pending hunk touches, and touches no hunk's edge, `base` takes the user's edits and the hunks move
--- with them, so the document holds `M.accepted_text(doc)` again and the user's text is never
--- altered. False (nothing changed) when it cannot: the stale rule then decides.
local function try_merge(proposal, doc)
  if doc.final or doc.create or proposal.answered then
    return false
  end
  local cur = current(doc)
  if not cur or not cur.buf or cur.text == M.accepted_text(doc) or cur.eol ~= doc.eol
    or (cur.bom or false) ~= (doc.bom or false) then
    return false
  end
  if not fold(proposal, doc, cur.text, true) then
    return false
  end
  doc.expect_version, doc.expect_hash = cur.version, text.sha256(cur.wire)
  doc.merged = true
  if vim.bo[cur.buf].modified then
    doc.was_dirty = true -- the user's unsaved typing is never saved for them
  end
  return true
end

--- Move `base` and the hunks so that `M.accepted_text(doc)` is `target`, where `target` differs from
--- it only in lines no accepted or pending hunk touches or neighbours (the merge rule above); false,
--- nothing changed, when it does not. `follow_view`: the proposal's view is told (`hooks.merged`).
fold = function(proposal, doc, target, follow_view)
  local expected = M.accepted_text(doc)
  local eidx = text.index(expected)
  local placed, delta = {}, 0 -- each hunk's span in `expected`, and the accepted hunks' shift before it
  for _, h in ipairs(doc.hunks) do
    local len = h.state == "accepted" and #h.text or (h.a1 - h.a0)
    placed[#placed + 1] = { h = h, e0 = h.a0 + delta, e1 = h.a0 + delta + len, before = delta }
    if h.state == "accepted" then
      delta = delta + #h.text - (h.a1 - h.a0)
    end
  end
  local base_spans = {}
  for _, u in ipairs(changed_lines(expected, target)) do
    local u0, u1, first, count = u[1], u[2], u[4], u[5]
    local shift = 0
    for _, x in ipairs(placed) do
      if x.h.state ~= "rejected" then
        local hl0, hl1 = hunk_lines(eidx, x.e0, x.e1)
        -- a changed line the hunk changes, or a line inserted inside, right before or right after it
        if (count > 0 and first <= hl1 and first + count - 1 >= hl0) or (count == 0 and first >= hl0 and first <= hl1 + 1)
          or (u[6] <= x.e1 and u[7] >= x.e0) then
          return false -- the user touched or neighbours a hunk: stale
        end
      end
      if x.e1 <= u0 and x.h.state == "accepted" then
        shift = x.before + #x.h.text - (x.h.a1 - x.h.a0)
      end
    end
    base_spans[#base_spans + 1] = { u0 - shift, u1 - shift, u[3] }
  end
  local moved = {}
  for _, h in ipairs(doc.hunks) do
    local d = 0
    for _, b in ipairs(base_spans) do
      if b[2] <= h.a0 then
        d = d + #b[3] - (b[2] - b[1])
      end
    end
    moved[h] = d
  end
  local old = { base = doc.base, review = M.review_text(doc) }
  doc.base = text.apply_spans(doc.base, base_spans)
  for _, h in ipairs(doc.hunks) do
    h.a0, h.a1 = h.a0 + moved[h], h.a1 + moved[h]
  end
  if M.accepted_text(doc) ~= target
    or (follow_view and not M.hooks.merged(proposal, doc, old.review, M.review_text(doc))) then
    doc.base = old.base -- cannot be told apart from the user's text, or the view cannot follow: stale
    for _, h in ipairs(doc.hunks) do
      h.a0, h.a1 = h.a0 - moved[h], h.a1 - moved[h]
    end
    return false
  end
  return true
end

local function write_doc(proposal, doc, new)
  local buf = buffers.find(doc.path)
  if not buf and (proposal.save == "never" or doc.was_loaded) then
    buf = vim.fn.bufadd(doc.path)
    vim.fn.bufload(buf)
    vim.bo[buf].buflisted = true
  end
  if buf then
    text.set_buffer_text(buf, new)
    local d = text.buffer_doc(buf)
    if d.text ~= new then
      return false, "the buffer does not hold the accepted text after applying"
    end
    doc.expect_version = vim.b[buf].changedtick
    doc.expect_hash = text.sha256(text.wire(new, d.eol))
    doc.buf = buf
    return true
  end
  local wire = text.wire(new, doc.eol)
  local bytes = (doc.bom and text.BOM or "") .. wire -- the file's BOM is kept, outside the text
  local ok, err = buffers.write_disk(doc.path, bytes)
  if not ok then
    return false, "cannot write " .. doc.name .. ": " .. tostring(err)
  end
  if buffers.read_disk(doc.path) ~= bytes then
    return false, "the file does not hold the accepted text after writing"
  end
  doc.expect_version = nil
  doc.expect_hash = text.sha256(wire)
  doc.on_disk = true
  return true
end

--- Re-check and make `doc` hold `M.accepted_text(doc)`. On a stale document nothing is written and
--- the proposal is answered (`stale`, or `partial` when earlier hunks already landed).
---@return boolean ok
function M.sync(proposal, doc, undo)
  if proposal.answered then
    return false
  end
  local function give_up(outcome, why)
    if undo then
      undo() -- the hunks just chosen did not land: they are not part of the answer
    end
    M.finish(proposal, outcome, why)
    return false
  end
  pcall(try_merge, proposal, doc) -- an error there leaves it to the stale rule
  if doc.final and doc.merged then
    -- `final` is the pane's text: its edits of other lines than the agent's hunks are the user's, as
    -- their typing in the file is (merged into `base`); `applied` stays the agent's hunks as sent
    local final = doc.final
    doc.final = nil
    local ok, folded = pcall(fold, proposal, doc, final, false)
    if not (ok and folded) then
      doc.final = final
      return give_up("stale", "you edited the proposed text of " .. doc.name .. " on or next to the agent's change "
        .. "after your edits of other lines were merged into it")
    end
  end
  local stale, why = M.is_stale(doc, true)
  if doc.create and not doc.created then
    local cur = current(doc)
    stale = cur ~= nil and cur.wire ~= ""
    why = doc.name .. " appeared on disk meanwhile"
  end
  if stale then
    return give_up("stale", why)
  end
  local outside = (not doc.outside_at_arrival and buffers.leads_outside(doc.path))
    or buffers.moved_since(doc.path, doc.real_at_arrival)
  if outside then -- the path again, right before the write: a folder swapped for a link meanwhile
    return give_up("stale", outside)
  end
  local ok, err = write_doc(proposal, doc, M.accepted_text(doc))
  if not ok then
    return give_up("failed", err)
  end
  doc.created = doc.created or doc.create
  doc.existed = doc.existed or vim.uv.fs_stat(doc.path) ~= nil
  doc.touched = true
  if M.pending_count(proposal) == 0 then
    M.finish(proposal)
  end
  return true
end

--- Accept hunks of `doc`: `texts` maps a hunk to its (possibly user-edited) new text.
function M.accept_hunks(proposal, doc, texts)
  local chosen = {}
  for h, t in pairs(texts) do
    if h.state == "pending" then
      h.state, h.text = "accepted", t
      chosen[#chosen + 1] = h
    end
  end
  return M.sync(proposal, doc, function()
    for _, h in ipairs(chosen) do
      h.state, h.text = "pending", nil
    end
  end)
end

--- Accept all that is pending in `doc`; `final` (optional) is the whole text the user accepted
--- when it differs from base + accepted hunks (the user edited outside the hunks).
function M.accept_all(proposal, doc, texts, final)
  local chosen = {}
  for _, h in ipairs(doc.hunks) do
    if h.state == "pending" then
      h.state, h.text = "accepted", (texts and texts[h]) or h.new
      chosen[#chosen + 1] = h
    end
  end
  if final and final ~= M.accepted_text(doc) then
    doc.final = final
  end
  return M.sync(proposal, doc, function()
    doc.final = nil
    for _, h in ipairs(chosen) do
      h.state, h.text = "pending", nil
    end
  end)
end

--- Reject one hunk (or all pending ones when `hunk` is nil) of `doc`.
function M.reject(proposal, doc, hunk)
  for _, h in ipairs(doc.hunks) do
    if h.state == "pending" and (hunk == nil or h == hunk) then
      h.state = "rejected"
    end
  end
  if M.pending_count(proposal) == 0 and not proposal.answered then
    M.finish(proposal)
  end
end

--- Hunks still waiting for a decision, over all documents.
function M.pending_count(proposal)
  local n = 0
  for _, doc in ipairs(proposal.docs) do
    for _, h in ipairs(doc.hunks) do
      if h.state == "pending" then
        n = n + 1
      end
    end
  end
  return n
end

local function applied_edits(doc)
  if doc.final then
    return text.line_edits(doc.base, doc.final, doc.encoding, doc.eol)
  end
  local edits = {}
  for _, h in ipairs(doc.hunks) do
    if h.state == "accepted" then
      edits[#edits + 1] = { range = h.range, newText = text.wire(h.text, doc.eol) }
    end
  end
  return edits
end

--- Answer the proposal (once) and close its view. `reason` overrides the outcome for `stale`,
--- `cancelled` and `failed`; otherwise it follows the hunks: all accepted `applied`, some
--- `partial`, none `rejected`. Pending hunks count as rejected.
function M.finish(proposal, reason, message)
  if proposal.answered then
    return
  end
  proposal.answered = true
  unwatch(proposal)
  M.open[proposal.id] = nil
  M.last_answered = proposal
  local accepted, total, adjusted = 0, 0, false
  local changes, versions, saved = {}, {}, true
  local save_failed, save_errors = {}, {} -- buffers without the user's unsaved text whose write did not complete
  for _, doc in ipairs(proposal.docs) do
    for _, h in ipairs(doc.hunks) do
      total = total + 1
      if h.state == "accepted" and doc.touched then
        accepted = accepted + 1
        adjusted = adjusted or (h.text ~= nil and h.text ~= h.new)
      end
    end
    adjusted = adjusted or (doc.touched and doc.final ~= nil)
    if doc.touched then
      if doc.create then
        changes[#changes + 1] = { kind = "create", uri = doc.uri }
      end
      local edits = applied_edits(doc)
      changes[#changes + 1] = {
        textDocument = { uri = doc.uri, version = doc.version == nil and vim.NIL or doc.version },
        edits = edits,
      }
      local buf = buffers.find(doc.path)
      local doc_saved = doc.on_disk == true and not buf
      if buf then
        local outside = (not doc.outside_at_arrival and buffers.leads_outside(doc.path))
          or buffers.moved_since(doc.path, doc.real_at_arrival)
        if outside then -- left unsaved in its buffer: saving would write outside the workspace (or elsewhere)
          doc_saved = false
          M.hooks.say(outside .. "; not saved", proposal.session_id)
        elseif proposal.save ~= "never" and not doc.was_dirty and vim.bo[buf].modified then
          local err
          doc_saved, err = buffers.save(buf)
          if not doc_saved then -- a BufWritePre that errors (format-on-save), a write that failed
            save_failed[#save_failed + 1] = doc.uri
            save_errors[#save_errors + 1] = string.format("%s was not saved: %s", doc.name,
              err and tostring(err):gsub("%s+", " "):sub(1, 300) or "the buffer still has unsaved changes after :write")
          end
        else
          doc_saved = not vim.bo[buf].modified
        end
      end
      saved = saved and doc_saved
      local cur = current(doc)
      versions[doc.uri] = {
        version = (cur and cur.version) or vim.NIL,
        sha256 = cur and text.sha256(cur.wire) or vim.NIL,
      }
    end
  end
  local outcome = reason
  local any_touched = #changes > 0
  if outcome == nil then
    if accepted == 0 or not any_touched then
      outcome = "rejected"
    elseif accepted == total then
      outcome = "applied"
    else
      outcome = "partial"
    end
  elseif any_touched and accepted > 0 then
    message = (message or reason) .. string.format(" (after %d of %d hunks had been applied)", accepted, total)
    outcome = "partial"
  end
  local result = { outcome = outcome, saved = any_touched and saved or false }
  if outcome == "applied" or outcome == "partial" then
    result.applied = { documentChanges = changes }
    result.versions = versions
    local merged = {}
    for _, doc in ipairs(proposal.docs) do
      if doc.touched and doc.merged then
        merged[#merged + 1] = doc.uri
      end
    end
    if #merged > 0 then -- the documents also hold the user's edits: `applied` is the agent's hunks as sent
      result._meta = { agentServer = { merged = merged } }
    end
    if #save_failed > 0 then -- the agent's change is in the buffer only because its write failed
      result._meta = result._meta or { agentServer = {} }
      result._meta.agentServer.saveFailed = save_failed
    end
  end
  if message then
    result.message = message
  end
  proposal.result = result
  proposal.req.reply(result)
  local what = proposal.label or "Edit"
  local line
  -- text the user typed into the proposed side is theirs: said, so that a slip is seen at once
  local yours = adjusted and " with your changes" or ""
  if outcome == "applied" then
    line = string.format("%s: applied%s%s", what, yours, result.saved and " and saved" or " (not saved)")
  elseif outcome == "partial" then
    line = string.format("%s: %d of %d hunks applied%s%s", what, accepted, total, yours,
      message and (" — " .. message) or "")
  elseif outcome == "stale" then
    line = string.format("%s: not applied — stale: %s", what, message or "the file changed")
  else
    line = string.format("%s: %s%s", what, outcome, message and (" — " .. message) or "")
  end
  for _, why in ipairs(save_errors) do -- the write's error, never swallowed: the user sees why it is not saved
    line = line .. " — " .. why
  end
  M.hooks.say(line, proposal.session_id)
  M.hooks.close(proposal, line) -- the echo area says the outcome, not the proposal's hint any more
end

-- Stale said at once: a change to a loaded document of a shown proposal, or to its file on disk (a
-- watcher on its folder: written, replaced or deleted by another program), is checked with the stale
-- rule on the next tick; a change of verdict is told to the views (`hooks.stale`).
local function recheck(proposal, doc, on_disk)
  if proposal.answered then
    return
  end
  pcall(try_merge, proposal, doc) -- an error there leaves it to the stale rule
  local stale, why = M.is_stale(doc, on_disk or doc.stale == true)
  if stale ~= (doc.stale == true) then
    doc.stale = stale
    proposal.stale = vim.iter(proposal.docs):any(function(d)
      return d.stale == true
    end)
    M.hooks.stale(proposal, doc, stale, why)
  elseif stale then
    M.hooks.current(proposal, doc) -- the view shows the text as it is now
  end
end

local function watch(proposal)
  proposal.watchers = {}
  for _, doc in ipairs(proposal.docs) do
    local buf = buffers.find(doc.path)
    if buf then
      vim.api.nvim_buf_attach(buf, false, {
        on_lines = function()
          if proposal.answered then
            return true -- detach
          end
          vim.schedule(function()
            recheck(proposal, doc, false)
          end)
        end,
      })
    end
    local watcher = vim.uv.new_fs_event()
    local name = vim.fn.fnamemodify(doc.path, ":t")
    if watcher and watcher:start(vim.fn.fnamemodify(doc.path, ":h"), {}, function(_, fname)
      if fname == nil or fname == name then
        vim.schedule(function()
          recheck(proposal, doc, true)
        end)
      end
    end) then
      proposal.watchers[#proposal.watchers + 1] = watcher
    elseif watcher then
      watcher:close()
    end
  end
end

function unwatch(proposal)
  for _, w in ipairs(proposal.watchers or {}) do
    pcall(w.stop, w)
    pcall(w.close, w)
  end
  proposal.watchers = nil
end

--- "Ask the agent again on the current text": a proposal still open (its turn waits for it) is
--- answered `stale` (the server tells the model to read the file again and redo the change on it);
--- after it was answered (rejected, closed, stale), a prompt says the same. `proposal`: nil for the
--- latest open one, else the last answered.
---@return boolean|nil ok, string|nil err
function M.ask_again(proposal, send_prompt)
  proposal = proposal or M.latest() or M.last_answered
  if not proposal then
    return nil, "no proposal to ask again about"
  end
  if M.is_restore(proposal) then
    return nil, proposal.label .. " is no change of the agent (/undo or /redo puts a file back): there is "
      .. "nothing to ask the agent. " .. M.restore_way(proposal)
  end
  local names = {}
  for _, doc in ipairs(proposal.docs) do
    names[#names + 1] = doc.name
  end
  local files = table.concat(names, ", ")
  if not proposal.answered then
    M.finish(proposal, "stale", "you asked the agent to redo it on the current text of " .. files)
    return true
  end
  send_prompt("Read " .. files .. " again and redo your change to it on its current text (I changed it while "
    .. "your proposal waited, so it was not applied).")
  return true
end

--- Whether `proposal` is a restore of `/undo` or `/redo` (the server titles its review "Undo turn N:
--- <file>", "Redo turn N: <file>"): no change of the agent, so no agent to ask again.
function M.is_restore(proposal)
  local label = proposal and proposal.label or ""
  return label:match("^Undo turn %d+: ") ~= nil or label:match("^Redo turn %d+: ") ~= nil
end

--- What to do with a restore that became stale, in words: reject it, and run the command again (it
--- asks about the user's change).
function M.restore_way(proposal)
  local cmd = proposal.label:match("^Redo") and "/redo" or "/undo"
  return string.format(":AgentReject it; %s again asks about your change before it replaces it", cmd)
end

--- The user cancelled the turn (`:AgentCancel`): the open proposals the server now withdraws were
--- cancelled by them, not by the agent.
function M.user_cancelled()
  for _, p in pairs(M.open) do
    p.user_cancelled = true
  end
end

--- Handle the server's request (`req` from `rpc`): build the proposal, answer at once when it is
--- stale or malformed, else show it.
---@param req table { params, reply, on_cancel }
---@param encoding string the negotiated position encoding
function M.receive(req, encoding)
  local params = req.params
  local proposal = {
    id = next_id,
    req = req,
    label = tostring(params.label or "Edit"):gsub("\r?\n", " ⏎ "), -- one line: a file name may hold a line break
    tool_call_id = params.toolCallId,
    session_id = params.sessionId,
    save = params.save == "never" and "never" or "if-clean",
    docs = {},
  }
  next_id = next_id + 1
  local function fail(outcome, message)
    proposal.answered = true
    proposal.result = { outcome = outcome, saved = false, message = message }
    req.reply(proposal.result)
    M.hooks.say(string.format("%s: not applied — %s: %s", proposal.label, outcome, message), proposal.session_id)
    return proposal
  end
  local changes = ((params.edit or {}).documentChanges) or {}
  local creates = {}
  for _, change in ipairs(changes) do
    if change.kind == "create" then
      creates[change.uri] = true
    elseif change.kind ~= nil then
      return fail("failed", "this client does not apply " .. tostring(change.kind) .. " operations")
    else
      local doc, err = parse_doc(change, params, encoding)
      if not doc then
        return fail("failed", err)
      end
      doc.raw_edits = change.edits
      proposal.docs[#proposal.docs + 1] = doc
    end
  end
  if #proposal.docs == 0 then
    return fail("failed", "the proposal holds no text edits")
  end
  for _, doc in ipairs(proposal.docs) do
    local ok, err, kind = init_doc(doc, creates[doc.uri])
    if not ok then
      return fail(kind or "failed", err)
    end
  end
  function req.on_cancel()
    -- The server withdraws a pending proposal when its turn is cancelled: by the user
    -- (`:AgentCancel`, marked by `M.user_cancelled`) or on its own (its approval timeout).
    M.finish(proposal, "cancelled", proposal.user_cancelled and "you cancelled the turn" or "withdrawn by the agent")
  end
  M.open[proposal.id] = proposal
  if M.pending_count(proposal) == 0 then
    M.finish(proposal)
    return proposal
  end
  local function show(tries)
    if proposal.answered then
      return
    end
    local ok, err = pcall(M.hooks.show, proposal)
    if not ok and tries > 0 then -- e.g. the command line is being edited: try again shortly
      vim.defer_fn(function()
        show(tries - 1)
      end, 300)
    elseif not ok then
      M.finish(proposal, "failed", "the editor could not show the proposal: " .. tostring(err))
    end
  end
  show(10)
  watch(proposal)
  return proposal
end

--- The most recent open proposal (for commands run outside its view).
function M.latest()
  local best
  for id, p in pairs(M.open) do
    if not best or id > best.id then
      best = p
    end
  end
  return best
end

return M
