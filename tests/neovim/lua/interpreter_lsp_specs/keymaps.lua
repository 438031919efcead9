-- Specs of the keys the plugin maps: the panel's keys and their descriptions, the global keys (off
-- unless set), and the proposal card's hint naming the keys as they are set. No server runs.
local specs = {}
local function it(name, fn)
  specs[#specs + 1] = { name, fn }
end

local function maps(buf)
  local out = {}
  local list = buf and vim.api.nvim_buf_get_keymap(buf, "n") or vim.api.nvim_get_keymap("n")
  for _, m in ipairs(list) do
    if (m.desc or ""):find("^Interpreter:") then
      out[m.lhs] = m.desc
    end
  end
  return out
end

it("a session's panel gets its keys, each with a description", function(t)
  local s = t.session()
  t.eq(maps(s.panel.buf), {
    a = "Interpreter: approve the proposal",
    c = "Interpreter: edit the proposal, :w approves it",
    r = "Interpreter: reject the proposal (the turn ends)",
    R = "Interpreter: reject the proposal with a reason (the model is asked again)",
    i = "Interpreter: write the proposal into the source buffer",
    o = "Interpreter: all output of the run under the cursor",
    ["<C-C>"] = "Interpreter: interrupt",
    q = "Interpreter: close the panel",
    ["]]"] = "Interpreter: the next request in the conversation",
    ["[["] = "Interpreter: the request before",
  }, "panel keys")
end)

it("no panel key shadows a motion or a scrolling key a reader needs", function(t)
  local s = t.session()
  local motions = { "h", "j", "k", "l", "w", "b", "e", "W", "B", "E", "G", "gg", "n", "N", "f", "t", "F", "T",
    "0", "$", "^", "{", "}", "(", ")", "%", "/", "?", "*", "#", "H", "M", "L", "v", "V", "y", "zz", "<C-D>", "<C-U>",
    "<C-F>", "<C-B>", "<C-E>", "<C-Y>", ":", ";", ",", "`", "'", "m", "p", "gO" }
  local mapped = maps(s.panel.buf)
  for _, key in ipairs(motions) do
    t.truthy(mapped[key] == nil, "the panel maps " .. key .. ", a motion: " .. tostring(mapped[key]))
  end
end)

it("]] and [[ move between the requests of the conversation", function(t)
  local s = t.session()
  for i = 1, 3 do
    s:user_chat("question " .. i)
    t.feed(s, "MESSAGE", { turnId = "t" .. i, seq = 0, delta = ("answer line\n"):rep(5), done = true })
  end
  t.lines(s)
  local win = s.panel:open()
  vim.api.nvim_set_current_win(win)
  vim.api.nvim_win_set_cursor(win, { 1, 0 })
  local function line() return vim.api.nvim_get_current_line() end
  vim.api.nvim_feedkeys("]]", "x", false)
  t.eq(line(), "## You", "on a request")
  t.eq(vim.fn.getline(vim.fn.line(".") + 1), "question 2", "the second one (the first is above the cursor's start)")
  vim.api.nvim_feedkeys("]]", "x", false)
  t.eq(vim.fn.getline(vim.fn.line(".") + 1), "question 3", "the third")
  vim.api.nvim_feedkeys("[[", "x", false)
  t.eq(vim.fn.getline(vim.fn.line(".") + 1), "question 2", "back to the second")
end)

it("global keys are off unless set", function(t)
  t.eq(maps(nil), {}, "after setup with the defaults")
  require("interpreter_lsp.keymaps").set_global({ run = "gxr", chat = false, toggle_panel = "gxp" })
  t.eq(maps(nil), {
    ["gxr"] = "Interpreter: run the selection, the cell or the line",
    ["gxp"] = "Interpreter: toggle the panel",
  }, "set ones")
  t.eq(vim.fn.maparg("gxr", "x"), ":InterpreterRun<CR>", "run works in visual mode too")
end)

it("a proposal card names the keys as they are set, and none that are off", function(t)
  local s = t.session({ keymaps = { approve = "<CR>", apply = false } })
  t.feed(s, "PROPOSAL", { proposalId = "p1", turnId = "t1", language = "python", code = "x = 1", autoRun = false })
  t.has_line("**Proposal 1** · python · risk: low · pending: <CR> approve · c edit · r reject · R reject, say why")
end)

it("q in the panel closes it", function(t)
  local s = t.session()
  local win = s.panel:open()
  vim.api.nvim_set_current_win(win)
  vim.cmd("vsplit | wincmd p")
  vim.api.nvim_feedkeys("q", "x", false)
  t.eq(s.panel:window(), nil, "closed")
end)

return specs
