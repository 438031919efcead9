-- Specs of the panel on its own: sections and their streamed bodies as the buffer shows them, the
-- windows that follow the end, and the window bar. No server runs.
local specs = {}
local function it(name, fn)
  specs[#specs + 1] = { name, fn }
end

it("a carriage return overwrites as a terminal would, and an unfinished line shows until it ends", function(t)
  local p = t.session().panel
  local sec = p:add("run")
  p:append(sec, "10%\r50%")
  t.eq(t.lines(), { "50%", "" }, "while unfinished")
  p:append(sec, "\r100%\nnext")
  p:finish_line(sec)
  t.eq(t.lines(), { "100%", "next", "" }, "ended")
  t.eq(p:body_lines(sec), { "100%", "next" }, "body")
end)

it("a huge line is clipped on screen and kept whole; a huge unfinished line is ended", function(t)
  local p = t.session().panel
  local sec = p:add("run")
  p:append(sec, string.rep("x", 2500) .. "\n")
  t.eq(t.lines()[1], string.rep("x", 2000) .. " … (500 more characters)", "on screen")
  t.eq(#p:body_lines(sec)[1], 2500, "kept whole")
  p:append(sec, string.rep("y", 20001))
  t.eq({ #sec.out, sec.partial }, { 2, "" }, "the unfinished line was ended")
end)

it("sections keep their place when an earlier one grows, and rows map back to sections", function(t)
  local p = t.session().panel
  local first = p:add("note")
  p:set_header(first, { "first" })
  local run = p:add("run")
  p:set_header(run, { "run" })
  local last = p:add("note")
  p:set_header(last, { "last" })
  t.lines()
  p:append(run, "a\nb\n")
  p:set_footer(run, { "~~~", "" })
  p:set_header(first, { "first", "grown" })
  t.eq(t.lines(), { "first", "grown", "", "run", "a", "b", "~~~", "", "last", "" }, "panel")
  t.eq({ p:line_of(first), p:line_of(run), p:line_of(last) }, { 0, 3, 8 }, "first lines")
  t.eq({ p:section_at(4), p:section_at(8), p:section_at(10) }, { run, last, nil }, "sections at rows")
end)

it("prepend puts sections above the shown ones", function(t)
  local p = t.session().panel
  local later = p:add("note")
  p:set_header(later, { "later" })
  t.lines()
  p:prepend(function()
    p:set_header(p:add("note"), { "earlier" })
  end)
  t.eq(t.lines(), { "earlier", "", "later", "" }, "after prepend")
  t.eq(p:line_of(later), 2, "the later section moved down")
end)

it("a window at the end follows new output; one scrolled up stays where the user put it", function(t)
  local s = t.session()
  local p = s.panel
  local win = p:open()
  local sec = p:add("run")
  p:append(sec, string.rep("line\n", 50))
  t.lines()
  t.eq(vim.api.nvim_win_get_cursor(win)[1], vim.api.nvim_buf_line_count(p.buf), "followed the end")
  vim.api.nvim_win_set_cursor(win, { 3, 0 })
  p:append(sec, "more\n")
  t.lines()
  t.eq(vim.api.nvim_win_get_cursor(win)[1], 3, "stayed")
  p:follow()
  p:append(sec, "after approving\n")
  t.lines()
  t.eq(vim.api.nvim_win_get_cursor(win)[1], vim.api.nvim_buf_line_count(p.buf), "follow() moves it to the end")
  p:close()
  t.eq(p:window(), nil, "closed")
end)

it("the window bar shows the session's state in every window of the panel, cut to fit", function(t)
  local s = t.session()
  local win = s.panel:open()
  t.feed(s, "TURN_STATUS", { turnId = "t1", state = "thinking" })
  t.eq(vim.wo[win].winbar, " python idle · thinking", "bar")
  s.model = "openai/a-model-with-a-rather-long-name-that-does-not-fit"
  s:update_winbar()
  t.eq(vim.wo[win].winbar, " python idle · thinking", "a part that does not fit is left out")
  s.model = "x 5%"
  s:update_winbar()
  t.eq(vim.wo[win].winbar, " python idle · thinking · x 5%%", "a % is escaped")
end)

return specs
