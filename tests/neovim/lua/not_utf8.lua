-- Documents that are not UTF-8, in a real Neovim (`nvim --clean -l`, run by test_units.py): the
-- strict validator, the buffer refusal (a latin1 buffer, a buffer holding raw invalid bytes), and the
-- transport guard — an answer that is not UTF-8 is replaced by an error answer to the same request
-- (it was sent as is: the server could not parse the line and waited 30 s for an answer).
vim.opt.rtp:prepend(assert(os.getenv("AGENT_SERVER_PLUGIN")))
local check = dofile(vim.fs.joinpath(vim.fs.dirname(debug.getinfo(1, "S").source:sub(2)), "check.lua"))
local eq = check.eq

local utf8 = require("agent_server.utf8")
eq({ utf8.invalid("plain ascii") }, {}, "ascii is UTF-8")
eq({ utf8.invalid("caf\u{e9} \u{1F600} \u{10FFFF}") }, {}, "2-, 4-byte and the last code point are UTF-8")
eq({ utf8.invalid("caf\233 na\239ve\n") }, { 2, 3 }, "latin1: two invalid bytes, the first at offset 3")
eq({ utf8.invalid("\192\128") }, { 2, 0 }, "an overlong NUL is invalid")
eq({ utf8.invalid("\237\160\128") }, { 3, 0 }, "an encoded surrogate is invalid")
eq({ utf8.invalid("ok\226\130") }, { 2, 2 }, "a cut sequence at the end")

local buffers = require("agent_server.buffers")
local dir = vim.fn.tempname()
vim.fn.mkdir(dir, "p")
local path = dir .. "/latin1.txt"
local raw = "caf\233 na\239ve\nsecond line\n"
assert(buffers.write_disk(path, raw))
-- not loaded: the disk bytes decide
local res, err = buffers.read_text_file({ path = path })
eq(res, nil, "a latin1 file on disk is not answered with text")
eq(err and err.data.agentServer, { notUtf8 = true, encoding = vim.NIL }, "refused as not UTF-8")
eq(err and err.message, path .. " is not UTF-8 text (2 invalid bytes, first at offset 3)", "the refusal")
-- loaded with the default 'fileencodings': Neovim falls back to latin1 and holds UTF-8 text
vim.cmd("edit " .. vim.fn.fnameescape(path))
eq(vim.bo.fileencoding, "latin1", "the buffer is latin1")
res, err = buffers.read_text_file({ path = path })
eq(err and err.data.agentServer, { notUtf8 = true, encoding = "latin1" }, "a latin1 buffer is refused")
eq(vim.api.nvim_buf_get_lines(0, 0, -1, false), { "caf\u{e9} na\u{ef}ve", "second line" },
  "the buffer is not reloaded with the raw bytes")
res, err = buffers.write_text_file({ path = path, content = "x\n" })
eq(err and err.data.agentServer.notUtf8, true, "nor written through")
vim.cmd("bwipeout!")
-- loaded with 'fileencodings' utf-8 only: the buffer holds the raw bytes
vim.o.fileencodings = "utf-8"
vim.cmd("edit " .. vim.fn.fnameescape(path))
res, err = buffers.read_text_file({ path = path })
eq(err and err.data.agentServer.notUtf8, true, "a buffer holding invalid bytes is refused")
vim.cmd("bwipeout!")

-- the transport: an answer that is not UTF-8 becomes an error answer to the same request
local rpc = require("agent_server.rpc")
local sent = {}
rpc.trace = function(direction, line)
  if direction == "->" then
    sent[#sent + 1] = line
  end
end
local r = assert(rpc.start({
  cmd = { "cat" },
  on_request = function(_, req)
    if req.method == "boom" then
      error("handler bug")
    end
    req.reply({ content = raw })
  end,
  on_notification = function() end,
}))
r:_on_request({ id = 7, method = "fs/read_text_file", params = {} })
r:_on_request({ id = 8, method = "boom", params = {} })
rpc.trace = nil
r:stop(true)
eq(#sent, 2, "one answer each")
local a, b = vim.json.decode(sent[1]), vim.json.decode(sent[2] or "{}")
eq({ a.id, a.error and a.error.code, a.result }, { 7, -32603, nil }, "the invalid answer became an error")
eq((a.error and a.error.message or ""):find("not UTF-8", 1, true) ~= nil, true, "saying why")
eq({ b.id, b.error and b.error.code }, { 8, -32603 }, "a handler that raises is answered")

check.done("not_utf8")
