-- The kitty graphics protocol, for images under the code without image.nvim: whether the terminal
-- Neovim runs in speaks it, sending a PNG to it, and the virtual lines that show it. Images are
-- shown with Unicode placeholders: the terminal holds the image in a *virtual* placement (U=1), and
-- draws it wherever the text U+10EEEE appears in the image id's foreground colour, the row and column
-- of each cell given by combining diacritics. Those cells are ordinary text in virtual lines, so the
-- image scrolls, folds and moves with the buffer without Neovim knowing it is an image, and a redraw
-- of the screen draws it again. Kitty and Ghostty show them; WezTerm draws the placeholders as boxes
-- (it has no U=1 yet), so it is used there only when asked for (setup option images = "kitty").
local M = {}

M.PLACEHOLDER = "\u{10EEEE}"

-- The row/column diacritics of the protocol (kitty's rowcolumn-diacritics.txt), as code point ranges:
-- the n-th code point stands for the number n - 1.
local RANGES = {
  { 0x0305 }, { 0x030D, 0x030E }, { 0x0310 }, { 0x0312 }, { 0x033D, 0x033F }, { 0x0346 }, { 0x034A, 0x034C },
  { 0x0350, 0x0352 }, { 0x0357 }, { 0x035B }, { 0x0363, 0x036F }, { 0x0483, 0x0487 }, { 0x0592, 0x0595 },
  { 0x0597, 0x0599 }, { 0x059C, 0x05A1 }, { 0x05A8, 0x05A9 }, { 0x05AB, 0x05AC }, { 0x05AF }, { 0x05C4 },
  { 0x0610, 0x0617 }, { 0x0657, 0x065B }, { 0x065D, 0x065E }, { 0x06D6, 0x06DC }, { 0x06DF, 0x06E2 }, { 0x06E4 },
  { 0x06E7, 0x06E8 }, { 0x06EB, 0x06EC }, { 0x0730 }, { 0x0732, 0x0733 }, { 0x0735, 0x0736 }, { 0x073A },
  { 0x073D }, { 0x073F, 0x0741 }, { 0x0743 }, { 0x0745 }, { 0x0747 }, { 0x0749, 0x074A }, { 0x07EB, 0x07F1 },
  { 0x07F3 }, { 0x0816, 0x0819 }, { 0x081B, 0x0823 }, { 0x0825, 0x0827 }, { 0x0829, 0x082D }, { 0x0951 },
  { 0x0953, 0x0954 }, { 0x0F82, 0x0F83 }, { 0x0F86, 0x0F87 }, { 0x135D, 0x135F }, { 0x17DD }, { 0x193A },
  { 0x1A17 }, { 0x1A75, 0x1A7C }, { 0x1B6B }, { 0x1B6D, 0x1B73 }, { 0x1CD0, 0x1CD2 }, { 0x1CDA, 0x1CDB },
  { 0x1CE0 }, { 0x1DC0, 0x1DC1 }, { 0x1DC3, 0x1DC9 }, { 0x1DCB, 0x1DCC }, { 0x1DD1, 0x1DE6 }, { 0x1DFE },
  { 0x20D0, 0x20D1 }, { 0x20D4, 0x20D7 }, { 0x20DB, 0x20DC }, { 0x20E1 }, { 0x20E7 }, { 0x20E9 }, { 0x20F0 },
  { 0x2CEF, 0x2CF1 }, { 0x2DE0, 0x2DFF }, { 0xA66F }, { 0xA67C, 0xA67D }, { 0xA6F0, 0xA6F1 }, { 0xA8E0, 0xA8F1 },
  { 0xAAB0 }, { 0xAAB2, 0xAAB3 }, { 0xAAB7, 0xAAB8 }, { 0xAABE, 0xAABF }, { 0xAAC1 }, { 0xFE20, 0xFE26 },
  { 0x10A0F }, { 0x10A38 }, { 0x1D185, 0x1D189 }, { 0x1D1AA, 0x1D1AD }, { 0x1D242, 0x1D244 },
}

---@type string[] the diacritic for 0, 1, 2, ... (1-based: DIACRITICS[n + 1] stands for n)
M.DIACRITICS = {}
for _, r in ipairs(RANGES) do
  for cp = r[1], r[2] or r[1] do
    table.insert(M.DIACRITICS, vim.fn.nr2char(cp))
  end
end

-- Escapes are base64 in chunks of at most this many bytes (the protocol's limit).
M.CHUNK = 4096
-- The tallest image drawn, in rows; at most half the window, never fewer than MIN_ROWS.
M.MAX_ROWS = 24
M.MIN_ROWS = 4

--- Which terminal Neovim runs in, when it shows Unicode placeholders: "kitty", "ghostty" or nil.
--- Read from the environment the terminal sets (TERM is the terminal's own outside tmux; inside tmux
--- the variables the terminal set for tmux's server still name it).
---@return string|nil
function M.terminal()
  local env = vim.env
  local term = env.TERM or ""
  if term == "xterm-kitty" or env.KITTY_WINDOW_ID then
    return "kitty"
  end
  if term == "xterm-ghostty" or env.GHOSTTY_RESOURCES_DIR or env.TERM_PROGRAM == "ghostty" then
    return "ghostty"
  end
  return nil
end

--- The UI an escape can be written to: Neovim's own terminal UI (not a GUI, not a headless embed).
---@return table|nil ui as nvim_list_uis() describes it
function M.tui()
  for _, ui in ipairs(vim.api.nvim_list_uis()) do
    -- Before nvim_ui_send, writing to the terminal means writing to this process's stderr, which is
    -- the terminal only for the TUI that started this Neovim (channel 1), as the OSC 52 clipboard does.
    if ui.stdout_tty and (vim.api.nvim_ui_send or ui.chan == 1) then
      return ui
    end
  end
  return nil
end

--- Wrap an escape for tmux, which passes it on to the terminal outside (needs `allow-passthrough on`).
---@param seq string
---@return string
function M.passthrough(seq)
  if not vim.env.TMUX or vim.env.TMUX == "" then
    return seq
  end
  return "\27Ptmux;" .. seq:gsub("\27", "\27\27") .. "\27\\"
end

--- Write escapes to the terminal. Tests replace this to see what is sent.
---@param data string
function M.write(data)
  if vim.api.nvim_ui_send then
    vim.api.nvim_ui_send(data)
  else
    -- Not io.stdout:write(): it does not handle EAGAIN on a long write (Neovim's OSC 52 says the same).
    vim.api.nvim_chan_send(vim.v.stderr, data)
  end
end

--- Width and height in pixels of a PNG file, from its IHDR chunk; nil when it is not a PNG.
---@param path string
---@return integer|nil width, integer|nil height
function M.png_size(path)
  local fd = io.open(path, "rb")
  if not fd then
    return nil
  end
  local head = fd:read(24) or ""
  fd:close()
  if #head < 24 or head:sub(1, 8) ~= "\137PNG\r\n\26\n" or head:sub(13, 16) ~= "IHDR" then
    return nil
  end
  local function u32(i)
    local a, b, c, d = head:byte(i, i + 3)
    return ((a * 256 + b) * 256 + c) * 256 + d
  end
  return u32(17), u32(21)
end

local winsize_declared = false

--- The size of a terminal cell in pixels (TIOCGWINSZ on the terminal), or nil when the terminal does
--- not say (then images are sized as if a cell were 8x16).
---@return number|nil width, number|nil height
function M.cell_size()
  local ok, ffi = pcall(require, "ffi")
  if not ok then
    return nil
  end
  if not winsize_declared then
    -- Declared under names of our own: image.nvim and others declare theirs, and a second declaration
    -- of a name is an error. ioctl may already be declared: then it is there to use.
    pcall(ffi.cdef, "struct interpreter_lsp_winsize { unsigned short row, col, xpixel, ypixel; };")
    pcall(ffi.cdef, "int ioctl(int, unsigned long, ...);")
    winsize_declared = true
  end
  local request = vim.fn.has("mac") == 1 and 0x40087468 or vim.fn.has("bsd") == 1 and 0x40087468 or 0x5413
  local ws = ffi.new("struct interpreter_lsp_winsize")
  -- stderr is the terminal in the TUI's Neovim (stdout too, since --embed points it there).
  for _, fd in ipairs({ 2, 1 }) do
    local called, rc = pcall(ffi.C.ioctl, fd, request, ws)
    if called and rc == 0 and ws.xpixel > 0 and ws.ypixel > 0 and ws.col > 0 and ws.row > 0 then
      return ws.xpixel / ws.col, ws.ypixel / ws.row
    end
  end
  return nil
end

--- Rows and columns of cells for an image of `w`x`h` pixels: its own size in cells, shrunk (never
--- enlarged) to fit `max_cols` x `max_rows`.
---@return integer cols, integer rows
function M.fit(w, h, cell_w, cell_h, max_cols, max_rows)
  local limit = #M.DIACRITICS
  max_cols = math.max(1, math.min(max_cols, limit))
  max_rows = math.max(1, math.min(max_rows, limit))
  local scale = math.min(1, max_cols * cell_w / w, max_rows * cell_h / h)
  local cols = math.max(1, math.min(max_cols, math.ceil(w * scale / cell_w - 0.01)))
  local rows = math.max(1, math.min(max_rows, math.ceil(h * scale / cell_h - 0.01)))
  return cols, rows
end

-- Image ids are global to the terminal window (shared with image.nvim and other programs): with true
-- colour (24-bit ids) they start at a random point of the upper range, else they are colour numbers
-- 16-255 (below 16 a terminal may draw the colour as a basic one, not an indexed one).
local next_true = nil
local next_256 = nil

local function new_id()
  if vim.o.termguicolors then
    if not next_true then
      next_true = 0x100000 + math.floor((vim.uv.hrtime() / 1000 + vim.fn.getpid() * 7919) % 0xE00000)
    end
    next_true = next_true >= 0xFFFFFF and 0x100000 or next_true + 1
    return next_true
  end
  next_256 = (next_256 or (16 + vim.fn.getpid() % 240)) + 1
  if next_256 > 255 then
    next_256 = 16
  end
  return next_256
end

---@type table<integer, boolean> ids sent to the terminal and not deleted yet
M.live = {}

local function hl_name(id)
  return "InterpreterKittyImage" .. id
end

--- The highlight whose foreground colour is the image id (what names the image to the terminal).
local function define_hl(id)
  if id <= 255 then
    vim.api.nvim_set_hl(0, hl_name(id), { fg = string.format("#%06x", id), ctermfg = id })
  else
    vim.api.nvim_set_hl(0, hl_name(id), { fg = string.format("#%06x", id) })
  end
end

vim.api.nvim_create_autocmd("ColorScheme", {
  group = vim.api.nvim_create_augroup("interpreter_lsp_kitty", { clear = true }),
  desc = "a colour scheme clears the highlights that name kitty images: define them again",
  callback = function()
    for id in pairs(M.live) do
      define_hl(id)
    end
  end,
})

vim.api.nvim_create_autocmd("VimLeavePre", {
  group = "interpreter_lsp_kitty",
  desc = "free the images this Neovim sent to the terminal",
  callback = function()
    for id in pairs(M.live) do
      pcall(M.delete, id)
    end
  end,
})

--- The escapes that send the PNG at `path` and make a virtual placement of `cols` x `rows` cells for
--- it. Quiet (q=2): a reply would arrive as input to Neovim. The cursor is left where it is (C=1).
--- Local terminals read the file themselves (t=f); over SSH the bytes go in the escapes (t=d).
---@return string|nil escapes, nil when the file cannot be read
function M.transmit_escapes(id, path, cols, rows, direct)
  local control = string.format("a=T,U=1,f=100,i=%d,c=%d,r=%d,C=1,q=2", id, cols, rows)
  if not direct then
    return M.passthrough("\27_G" .. control .. ",t=f;" .. vim.base64.encode(path) .. "\27\\")
  end
  local fd = io.open(path, "rb")
  if not fd then
    return nil
  end
  local data = vim.base64.encode(fd:read("*a") or "")
  fd:close()
  local out = {}
  for i = 1, #data, M.CHUNK do
    local more = i + M.CHUNK <= #data and 1 or 0
    local keys = i == 1 and (control .. ",t=d,m=" .. more) or ("m=" .. more)
    table.insert(out, M.passthrough("\27_G" .. keys .. ";" .. data:sub(i, i + M.CHUNK - 1) .. "\27\\"))
  end
  return table.concat(out)
end

--- Virtual lines of placeholder cells for image `id`, `cols` x `rows`, each line starting with `indent`.
---@return table virt_lines
function M.placeholder_lines(id, cols, rows, indent)
  local hl = hl_name(id)
  local out = {}
  for r = 0, rows - 1 do
    local cells = {}
    for c = 0, cols - 1 do
      cells[c + 1] = M.PLACEHOLDER .. M.DIACRITICS[r + 1] .. M.DIACRITICS[c + 1]
    end
    table.insert(out, { { indent, "" }, { table.concat(cells), hl } })
  end
  return out
end

---@class interpreter_lsp.KittyImage
---@field id integer
---@field path string
---@field cols integer
---@field rows integer

--- Send the PNG at `path` to the terminal, sized for window `win`; nil when it cannot be shown there
--- (not a PNG, no terminal UI).
---@param path string
---@param win integer|nil the window it will show in (its width and height bound the image)
---@param indent integer columns left of the image
---@return interpreter_lsp.KittyImage|nil
function M.show(path, win, indent)
  if not M.tui() or not path:lower():match("%.png$") then
    return nil
  end
  local w, h = M.png_size(path)
  if not w or w == 0 or h == 0 then
    return nil
  end
  local cell_w, cell_h = M.cell_size()
  cell_w, cell_h = cell_w or 8, cell_h or 16
  local width = win and vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_width(win) or vim.o.columns
  local height = win and vim.api.nvim_win_is_valid(win) and vim.api.nvim_win_get_height(win) or vim.o.lines
  -- Leave room for the sign and number columns; a cell never wider than the text area.
  local textoff = win and vim.api.nvim_win_is_valid(win) and (vim.fn.getwininfo(win)[1] or {}).textoff or 0
  local max_rows = math.max(M.MIN_ROWS, math.min(M.MAX_ROWS, math.floor(height / 2)))
  local cols, rows = M.fit(w, h, cell_w, cell_h, width - textoff - indent - 1, max_rows)
  local id = new_id()
  local direct = vim.env.SSH_CONNECTION ~= nil or vim.env.SSH_TTY ~= nil
  local seq = M.transmit_escapes(id, path, cols, rows, direct)
  if not seq then
    return nil
  end
  define_hl(id)
  M.live[id] = true
  M.write(seq)
  return { id = id, path = path, cols = cols, rows = rows }
end

--- Free image `id` in the terminal (its data and its virtual placement).
---@param id integer
function M.delete(id)
  if not M.live[id] then
    return
  end
  M.live[id] = nil
  if M.tui() then
    M.write(M.passthrough(string.format("\27_Ga=d,d=I,i=%d,q=2\27\\", id)))
  end
end

return M
