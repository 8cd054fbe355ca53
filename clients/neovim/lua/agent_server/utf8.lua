--- Strict UTF-8 validation (a leaf: no module of ours), for the transport (`rpc` never sends a line
--- that is not UTF-8) and for documents (`buffers`, `proposals` refuse text that is not UTF-8).
local M = {}

--- Invalid UTF-8 in `s` (strict: no overlong forms, surrogates or code points past U+10FFFF), counted
--- as the server counts them (each byte that is not part of a valid sequence): nil when `s` is
--- UTF-8, else the count and the 0-based byte offset of the first.
---@return integer|nil count, integer|nil first
function M.invalid(s)
  local find, byte = string.find, string.byte
  local i, count, first = 1, 0, nil
  while true do
    i = find(s, "[\128-\255]", i)
    if not i then
      break
    end
    local c = byte(s, i)
    local len, lo, hi = -1, 0x80, 0xBF
    if c >= 0xC2 and c <= 0xDF then
      len = 1
    elseif c == 0xE0 then
      len, lo = 2, 0xA0
    elseif (c >= 0xE1 and c <= 0xEC) or c == 0xEE or c == 0xEF then
      len = 2
    elseif c == 0xED then
      len, hi = 2, 0x9F
    elseif c == 0xF0 then
      len, lo = 3, 0x90
    elseif c >= 0xF1 and c <= 0xF3 then
      len = 3
    elseif c == 0xF4 then
      len, hi = 3, 0x8F
    end
    local ok = len > 0
    for k = 1, math.max(len, 0) do
      local b = byte(s, i + k)
      if not b or b < (k == 1 and lo or 0x80) or b > (k == 1 and hi or 0xBF) then
        ok = false
        break
      end
    end
    if ok then
      i = i + len + 1
    else
      count = count + 1
      first = first or (i - 1)
      i = i + 1
    end
  end
  if count == 0 then
    return nil
  end
  return count, first
end

return M
