-- The prompt buffer: where a request to the model is written when :Interpreter has no text. Several lines
-- are fine; <CR> in normal mode or <C-s> (normal and insert mode) sends it, <C-p> / <C-n> in normal mode
-- step through the prompts sent before (kept across sessions), q or <Esc><Esc> closes it unsent. It opens below
-- the panel (the conversation stays in view) and the cursor returns where it was after sending.
local M = {}

-- Prompts sent, oldest first, kept across sessions in stdpath("state") (the user's own words, never in a
-- repository), at most MAX of them.
local MAX = 200

function M.file()
  return vim.fn.stdpath("state") .. "/interpreter_lsp/prompts.json"
end

---@type string[]|nil
M.history = nil

local function load()
  if M.history then
    return M.history
  end
  M.history = {}
  local fd = io.open(M.file(), "r")
  if fd then
    local ok, data = pcall(vim.json.decode, fd:read("*a"))
    fd:close()
    if ok and type(data) == "table" then
      for _, p in ipairs(data) do
        if type(p) == "string" then
          table.insert(M.history, p)
        end
      end
    end
  end
  return M.history
end

local function save()
  local history = load()
  if #history > MAX then
    M.history = vim.list_slice(history, #history - MAX + 1)
  end
  pcall(vim.fn.mkdir, vim.fn.fnamemodify(M.file(), ":h"), "p")
  local tmp = M.file() .. ".tmp"
  local fd = io.open(tmp, "w")
  if fd then
    fd:write(vim.json.encode(M.history))
    fd:close()
    vim.uv.fs_rename(tmp, M.file())
  end
end

local current = nil -- {buf, win, origin, pos}

local function set_text(buf, text)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, vim.split(text or "", "\n", { plain = true }))
end

local function close()
  if not current then
    return
  end
  local c = current
  current = nil
  if vim.api.nvim_win_is_valid(c.win) and #vim.api.nvim_list_wins() > 1 then
    pcall(vim.api.nvim_win_close, c.win, true)
  end
  if vim.api.nvim_buf_is_valid(c.buf) then
    pcall(vim.api.nvim_buf_delete, c.buf, { force = true })
  end
  if vim.api.nvim_win_is_valid(c.origin) then
    vim.api.nvim_set_current_win(c.origin)
  end
  vim.cmd("stopinsert")
end

--- Open the prompt buffer. `on_send(text)` gets what was written.
---@param args {title: string|nil, on_send: fun(text: string), panel_win: integer|nil}
function M.open(args)
  if current and vim.api.nvim_win_is_valid(current.win) then
    close()
  end
  local origin = vim.api.nvim_get_current_win()
  local buf = vim.api.nvim_create_buf(false, true)
  vim.bo[buf].bufhidden = "wipe"
  vim.bo[buf].filetype = "markdown"
  pcall(vim.api.nvim_buf_set_name, buf, "interpreter://prompt")
  local win
  if args.panel_win and vim.api.nvim_win_is_valid(args.panel_win) then
    win = vim.api.nvim_open_win(buf, true, { split = "below", win = args.panel_win, height = 6 })
  else
    win = vim.api.nvim_open_win(buf, true, { split = "below", win = -1, height = 6 })
  end
  vim.wo[win].winfixheight = true
  vim.wo[win].wrap = true
  vim.wo[win].number = false
  vim.wo[win].relativenumber = false
  vim.wo[win].winbar = " " .. (args.title and ("Ask about " .. args.title) or "Ask")
    .. " · <CR>/<C-s> sends · <C-p> earlier · q"
  current = { buf = buf, win = win, origin = origin, pos = #load() + 1 }

  local function send()
    local text = vim.trim(table.concat(vim.api.nvim_buf_get_lines(buf, 0, -1, false), "\n"))
    if text == "" then
      return
    end
    local history = load()
    if history[#history] ~= text then
      table.insert(history, text)
      save()
    end
    close()
    args.on_send(text)
  end
  local function step(delta)
    local history = load()
    if not current or #history == 0 then
      return
    end
    current.pos = math.max(1, math.min(#history + 1, current.pos + delta))
    set_text(buf, history[current.pos] or "")
  end
  local function map(modes, lhs, fn, desc)
    vim.keymap.set(modes, lhs, fn, { buffer = buf, nowait = true, desc = desc })
  end
  map("n", "<CR>", send, "Interpreter: send the prompt")
  map({ "n", "i" }, "<C-s>", send, "Interpreter: send the prompt")
  map("n", "<C-p>", function() step(-1) end, "Interpreter: the prompt sent before")
  map("n", "<C-n>", function() step(1) end, "Interpreter: the prompt sent after")
  map("n", "q", close, "Interpreter: close the prompt, unsent")
  map("n", "<Esc><Esc>", close, "Interpreter: close the prompt, unsent")
  vim.cmd("startinsert")
  return buf, win
end

return M
