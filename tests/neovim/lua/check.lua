-- The check helpers of the Lua unit scripts (units.lua, not_utf8.lua), loaded with dofile: `eq`
-- counts and prints a failure; `done(name)` prints the summary and exits 1 on any failure.
local M = { failures = 0 }

--- Milliseconds a wait for an event may take before it is a hang (tests/support/timeouts.py's HANG).
M.HANG = 60000 * (tonumber(os.getenv("AGENT_SERVER_TEST_HANG_SCALE")) or 1)

function M.eq(got, want, what)
  if not vim.deep_equal(got, want) then
    M.failures = M.failures + 1
    io.stdout:write(string.format("FAIL %s: got %s, want %s\n", what, vim.inspect(got), vim.inspect(want)))
  end
end

function M.done(name)
  local n = M.failures
  io.stdout:write(n == 0 and (name .. ": ok\n") or string.format("%s: %d failure(s)\n", name, n))
  os.exit(n == 0 and 0 or 1)
end

return M
