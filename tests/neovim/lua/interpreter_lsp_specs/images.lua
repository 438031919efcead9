-- Specs of images under the code (inline.lua, images.lua, kitty.lua): which way an image is drawn
-- (setup option `images`), image.nvim's calls, the kitty graphics escapes and placeholder cells, and
-- an image going with its block. image.nvim is a stand-in recording its calls; the terminal is
-- kitty.write replaced by a recorder and kitty.tui by a terminal UI.
local specs = {}
local function it(name, fn)
  specs[#specs + 1] = { name, fn }
end

-- A 1x1 PNG.
local PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="

--- A buffer in the current window with a two-line cell, and a run of it bound to id `id` whose block
--- is anchored under the cell.
local function cell_run(s, id)
  local buf = vim.api.nvim_get_current_buf()
  if vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] ~= "import matplotlib" then
    buf = vim.api.nvim_create_buf(true, false)
    vim.api.nvim_buf_set_lines(buf, 0, -1, false, { "import matplotlib", "plot()", "", "more = 1" })
    vim.api.nvim_set_current_buf(buf)
  end
  local anchor = require("interpreter_lsp.inline").anchor(buf, 0, 2)
  local run = s:user_run({ language = "python", code = "plot()", origin = "user", anchor = anchor })
  s:bind_run(run, id)
  return buf, run
end

--- Feed an image output and the end of run `id`, then wait for its block under the code.
local function image_run(t, s, id, data)
  t.feed(s, "OUTPUT", { runId = id, seq = 0, kind = "display", data = data or { ["image/png"] = PNG } })
  t.feed(s, "RUN_STATUS", { runId = id, state = "ok", language = "python", durationMs = 40 })
  t.lines(s)
  local inline = require("interpreter_lsp.inline")
  vim.wait(2000, function()
    local run = s.runs[id]
    local marks = vim.api.nvim_buf_get_extmarks(run.anchor.buf, inline.ns, 0, -1, { details = true })
    for _, m in ipairs(marks) do
      for _, vl in ipairs(m[4].virt_lines or {}) do
        if vl[1][1]:find("[image]", 1, true) then
          return true
        end
      end
    end
    return false
  end, 10)
end

--- A stand-in image.nvim: records from_file's arguments, and each image's render and clear.
local function fake_image_nvim()
  local calls = {}
  package.loaded["image"] = {
    from_file = function(path, o)
      local rec = { path = path, opts = o, rendered = 0, cleared = 0 }
      table.insert(calls, rec)
      return {
        render = function() rec.rendered = rec.rendered + 1 end,
        clear = function() rec.cleared = rec.cleared + 1 end,
      }
    end,
  }
  return calls
end

--- No terminal named by the environment: each spec names the one it is about.
local function no_terminal()
  for _, name in ipairs({ "KITTY_WINDOW_ID", "GHOSTTY_RESOURCES_DIR", "TERM_PROGRAM", "TMUX", "SSH_CONNECTION", "SSH_TTY" }) do
    vim.env[name] = nil
  end
  vim.env.TERM = "xterm-256color"
end

--- A terminal UI that speaks kitty graphics: kitty.tui() answers, and what is written is kept.
local function fake_terminal()
  no_terminal()
  local kitty = require("interpreter_lsp.kitty")
  local written = {}
  kitty.tui = function()
    return { chan = 1, stdout_tty = true }
  end
  kitty.write = function(data)
    table.insert(written, data)
  end
  kitty.cell_size = function()
    return 10, 20
  end
  return kitty, written
end

it("the images option picks image.nvim, the kitty protocol, or the path", function(t)
  no_terminal()
  local images = require("interpreter_lsp.images")
  local kitty = require("interpreter_lsp.kitty")
  t.eq(images.mode("auto"), "path", "headless, no image.nvim")
  t.eq(images.mode("kitty"), "path", "no terminal UI to draw in")
  kitty.tui = function()
    return { chan = 1, stdout_tty = true }
  end
  t.eq(images.mode("auto"), "path", "a terminal that is not kitty's")
  t.eq(images.mode("kitty"), "kitty", "asked for")
  vim.env.TERM = "xterm-kitty"
  t.eq(images.mode("auto"), "kitty", "kitty")
  t.eq(images.mode("path"), "path", "turned off")
  vim.env.TERM = "xterm-256color"
  vim.env.GHOSTTY_RESOURCES_DIR = "/usr/share/ghostty"
  t.eq(images.mode(nil), "kitty", "Ghostty")
  vim.env.GHOSTTY_RESOURCES_DIR = nil
  vim.env.TERM_PROGRAM = "WezTerm"
  t.eq(images.mode("auto"), "path", "WezTerm draws the placeholders as boxes: only when asked for")
  fake_image_nvim()
  t.eq(images.mode("auto"), "image.nvim", "image.nvim first")
  t.eq(images.mode("kitty"), "kitty", "kitty asked for, image.nvim installed")
  t.eq(images.mode("path"), "path", "turned off")
end)

it("image.nvim draws a run's image below its block, and it goes when the cell runs again or is cleared", function(t)
  local all = fake_image_nvim()
  local s = t.session()
  local buf = cell_run(s, "r1")
  -- The calls for the code buffer (the panel draws its own copy below its "[image] path" line).
  local function calls()
    return vim.tbl_filter(function(c) return c.opts.buffer == buf end, all)
  end
  image_run(t, s, "r1")
  vim.wait(1000, function() return #calls() > 0 end, 10)
  t.eq(#calls(), 1, "one image drawn in the code buffer: " .. vim.inspect(all))
  local c = calls()[1]
  t.truthy(c.path:find("r1%-1%.png$"), c.path)
  t.eq(c.opts.window, vim.api.nvim_get_current_win(), "in its window")
  t.eq({ c.opts.x, c.opts.y }, { 0, 1 }, "on the cell's last line (image.nvim draws below its y line)")
  t.eq(c.opts.with_virtual_padding, true, "padded: the text below moves down")
  t.eq(c.opts.render_offset_top, 2, "below the block's two lines (how it ended, the path)")
  t.eq(c.rendered, 1, "rendered")
  -- The same cell again: the old image goes, the new one is drawn.
  local _, run2 = cell_run(s, "r2")
  t.eq(c.cleared, 1, "the earlier image is cleared when the cell runs again")
  image_run(t, s, "r2")
  vim.wait(1000, function() return #calls() > 1 end, 10)
  local c2 = calls()[2]
  t.truthy(c2 and c2.path:find("r2%-1%.png$"), vim.inspect(calls()))
  t.eq(c2.opts.y, 1, "the same place")
  t.eq(#calls(), 2, "drawn once")
  -- :InterpreterClearOutput: the block and its image go.
  vim.cmd("InterpreterClearOutput")
  t.eq(c2.cleared, 1, "cleared with the output")
  t.eq(require("interpreter_lsp_test").inline_lines(buf), {}, "no block left")
  t.truthy(run2.anchor, "the run keeps its anchor (the panel still has its output)")
end)

it("with images = 'path' image.nvim is left alone and the path shows under the code", function(t)
  local calls = fake_image_nvim()
  local s = t.session({ images = "path" })
  local buf = cell_run(s, "r1")
  image_run(t, s, "r1")
  vim.wait(200, function() return #calls > 0 end, 10)
  t.eq(#calls, 0, "image.nvim not called, in the code or in the panel")
  local virt = require("interpreter_lsp_test").inline_lines(buf)
  t.truthy(virt[2] and virt[2].text:find("  │ [image] " .. s.opts.image_dir, 1, true), vim.inspect(virt))
end)

it("in kitty, a PNG is sent with the graphics protocol and shown as placeholder cells under the code", function(t)
  local kitty, written = fake_terminal()
  vim.o.termguicolors = true
  local s = t.session({ images = "auto" })
  vim.env.TERM = "xterm-kitty"
  local buf = cell_run(s, "r1")
  image_run(t, s, "r1")
  local path = s.runs.r1.last_image
  -- The size is read from the PNG's header (the terminal reads the file itself).
  local head = "\137PNG\r\n\26\n\0\0\0\13IHDR\0\0\2\128\0\0\1\224\8\6\0\0\0"
  t.eq({ kitty.png_size((function()
    local f = vim.fn.tempname() .. ".png"
    local fd = assert(io.open(f, "wb"))
    fd:write(head)
    fd:close()
    return f
  end)()) }, { 640, 480 }, "PNG size from its header")
  local marks = vim.api.nvim_buf_get_extmarks(buf, require("interpreter_lsp.inline").ns, 0, -1, { details = true })
  local lines = marks[1][4].virt_lines
  local id = tonumber(lines[3][2][2]:match("^InterpreterKittyImage(%d+)$"))
  t.truthy(id, "image rows under the block: " .. vim.inspect(lines))
  -- One escape for the image under the code, one for the panel's (sized for the panel).
  t.eq(#written, 2, "two escapes: " .. vim.inspect(written))
  local seq = vim.tbl_filter(function(w) return w:find(",i=" .. id .. ",", 1, true) ~= nil end, written)[1]
  local cols, rows = (seq or ""):match("^\27_Ga=T,U=1,f=100,i=%d+,c=(%d+),r=(%d+),C=1,q=2,t=f;[A-Za-z0-9+/=]+\27\\$")
  t.truthy(cols, "transmit and virtual placement, quiet: " .. vim.inspect(written))
  t.eq(vim.base64.decode(seq:match(";(.-)\27")), path, "the saved file, by path")
  cols, rows = tonumber(cols), tonumber(rows)
  t.eq({ cols, rows }, { 1, 1 }, "a 1x1 image is one cell")
  t.truthy(id >= 0x100000, "a 24-bit id with true colour: " .. id)
  local hl = vim.api.nvim_get_hl(0, { name = "InterpreterKittyImage" .. id })
  t.eq(hl.fg, id, "the placeholders' colour is the image id")
  t.eq(#lines, 3, "how it ended, the path, one row of the image")
  t.eq(lines[3][2], { kitty.PLACEHOLDER .. "\u{0305}\u{0305}", "InterpreterKittyImage" .. id }, "row 0, column 0")
  t.eq(marks[1][2], 1, "under the cell's last line")
  -- The cell runs again: the terminal frees the old image.
  cell_run(s, "r2")
  t.eq(written[3], string.format("\27_Ga=d,d=I,i=%d,q=2\27\\", id), "the old image deleted")
  t.eq(kitty.live[id], nil, "not live any more")
end)

it("kitty placeholders: rows and columns by diacritics, sizes fitted to the window", function(t)
  local kitty = require("interpreter_lsp.kitty")
  t.eq(#kitty.DIACRITICS, 297, "the protocol's diacritics")
  t.eq({ kitty.DIACRITICS[1], kitty.DIACRITICS[2], kitty.DIACRITICS[3], kitty.DIACRITICS[297] },
    { "\u{0305}", "\u{030D}", "\u{030E}", "\u{1D244}" }, "0, 1, 2 and the last")
  local lines = kitty.placeholder_lines(42, 3, 2, "  ")
  t.eq(#lines, 2, "rows")
  local P = kitty.PLACEHOLDER
  t.eq(lines[2], { { "  ", "" }, { P .. "\u{030D}\u{0305}" .. P .. "\u{030D}\u{030D}" .. P .. "\u{030D}\u{030E}",
    "InterpreterKittyImage42" } }, "row 1, columns 0-2")
  t.eq(vim.fn.strdisplaywidth(lines[1][2][1]), 3, "one cell each")
  t.eq({ kitty.fit(640, 480, 10, 20, 200, 24) }, { 64, 24 }, "its own size in cells")
  t.eq({ kitty.fit(640, 480, 10, 20, 200, 12) }, { 32, 12 }, "shrunk to the rows")
  t.eq({ kitty.fit(640, 480, 10, 20, 40, 24) }, { 40, 15 }, "shrunk to the columns")
  t.eq({ kitty.fit(20, 20, 10, 20, 200, 24) }, { 2, 1 }, "never enlarged")
end)

it("kitty escapes: the bytes in chunks over SSH, wrapped for tmux, and only PNG", function(t)
  local kitty, written = fake_terminal()
  local dir = vim.fn.tempname()
  vim.fn.mkdir(dir, "p")
  local big = dir .. "/big.png"
  local fd = assert(io.open(big, "wb"))
  fd:write("\137PNG\r\n\26\n\0\0\0\13IHDR\0\0\0\100\0\0\0\100" .. string.rep("x", 7000))
  fd:close()
  local seq = kitty.transmit_escapes(7, big, 10, 5, true)
  local chunks = vim.split(seq, "\27\\", { plain = true, trimempty = true })
  t.eq(#chunks, 3, "9,372 bytes of base64 in three escapes")
  t.truthy(chunks[1]:find("^\27_Ga=T,U=1,f=100,i=7,c=10,r=5,C=1,q=2,t=d,m=1;"), chunks[1])
  t.truthy(chunks[2]:find("^\27_Gm=1;"), chunks[2])
  t.truthy(chunks[3]:find("^\27_Gm=0;"), chunks[3])
  for _, c in ipairs(chunks) do
    t.truthy(#c:match(";(.*)$") <= kitty.CHUNK, "at most 4096 bytes a chunk")
  end
  local data = table.concat(vim.tbl_map(function(c) return c:match(";(.*)$") end, chunks))
  local bytes = assert(io.open(big, "rb")):read("*a")
  t.eq(vim.base64.decode(data), bytes, "the file's bytes")
  vim.env.TMUX = "/tmp/tmux-0/default,1,0"
  t.eq(kitty.passthrough("\27_Ga=d\27\\"), "\27Ptmux;\27\27_Ga=d\27\27\\\27\\", "tmux passthrough")
  vim.env.TMUX = nil
  -- A JPEG keeps its path line: the protocol's PNG is what the kernel's figures are.
  vim.env.TERM = "xterm-kitty"
  local s = t.session()
  local buf = cell_run(s, "r1")
  image_run(t, s, "r1", { ["image/jpeg"] = PNG })
  t.eq(written, {}, "nothing sent for a JPEG")
  local virt = require("interpreter_lsp_test").inline_lines(buf)
  t.eq(#virt, 2, "how it ended and the path: " .. vim.inspect(virt))
end)

return specs
