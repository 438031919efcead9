-- What a person reads is what runs: the characters of code that do not show, or that change how the text
-- around them is shown ("Trojan Source", CVE-2021-42574), drawn as visible `<U+202E>` markers.
--
-- Neovim itself draws some of them visibly (U+202E as <202e>, a carriage return as ^M), but not all: a
-- Hangul filler (U+3164, which Python accepts in a name) shows as blank, a tag character (U+E0041), a soft
-- hyphen or a line separator as nothing, a zero-width joiner or a tag after a letter joins that letter's
-- cell, and U+061C reaches the terminal, which may apply bidi to it. The server rates such code at least
-- medium and names the characters (server/interpreter_lsp/safety/visible.py); here each one becomes a
-- marker wherever code is read before it runs or is written: the panel's cards and the model's text
-- (substituted display lines: that buffer is never read back), the diff before writing a proposal, and the
-- buffer that edits a proposal (concealed, with the marker as virtual text: its text is what `:w` approves).
--
-- The set is the server's: general categories Cc (tab and line feed excepted; a carriage return only when
-- no line feed follows it), Cf, Co, Cs, Zl, Zp, and Default_Ignorable_Code_Point, except the variation
-- selectors (U+FE00..U+FE0F, U+E0100..U+E01EF: "⚠️" ends with one) and a zero-width joiner between two
-- symbols (an emoji sequence; the symbol before it may carry its variation selector, as in "❤️‍🔥"). The
-- tests check this against the server's answers (clients/hidden-characters.json) and the server itself.
-- Lua has no table of Unicode's general categories, so HIDDEN below lists the ranges (generated from
-- Unicode 15.1, Python 3.13's unicodedata). Unassigned code points (Cn, about 700 ranges that change with
-- every Unicode version) are left out but for the noncharacters: the server marks them and Neovim shows
-- them as they come (usually a box). SYMBOLS, for the joiner, is the part of So and Sk
-- that emoji come from: a joiner between two other symbols is marked here though the server would not, never
-- the other way round.
local M = {}

local byte = string.byte

-- Code points hidden by themselves (inclusive ranges, sorted): C0 and C1 controls, Cf, Zl, Zp, Cs, Co and
-- the Default_Ignorable_Code_Points, less the variation selectors. Tab, line feed, carriage return and the
-- zero-width joiner (U+200D, inside U+200B..U+200F) are decided by `find`.
local HIDDEN = {
  { 0x0000, 0x0008 }, { 0x000B, 0x000C }, { 0x000E, 0x001F }, { 0x007F, 0x009F }, { 0x00AD, 0x00AD },
  { 0x034F, 0x034F }, { 0x0600, 0x0605 }, { 0x061C, 0x061C }, { 0x06DD, 0x06DD }, { 0x070F, 0x070F },
  { 0x0890, 0x0891 }, { 0x08E2, 0x08E2 }, { 0x115F, 0x1160 }, { 0x17B4, 0x17B5 }, { 0x180B, 0x180F },
  { 0x200B, 0x200F }, { 0x2028, 0x202E }, { 0x2060, 0x206F }, { 0x3164, 0x3164 }, { 0xD800, 0xF8FF },
  { 0xFEFF, 0xFEFF }, { 0xFFA0, 0xFFA0 }, { 0xFFF0, 0xFFFB }, { 0x110BD, 0x110BD }, { 0x110CD, 0x110CD },
  { 0x13430, 0x1343F }, { 0x1BCA0, 0x1BCA3 }, { 0x1D173, 0x1D17A }, { 0xE0000, 0xE00FF }, { 0xE01F0, 0xE0FFF },
  { 0xF0000, 0xFFFFD }, { 0x100000, 0x10FFFD },
}

-- Symbols (So, Sk) a zero-width joiner may join (Unicode 15.1): arrows, technical and geometric symbols,
-- dingbats, and the emoji planes.
local SYMBOLS = {
  { 0x2195, 0x2199 }, { 0x219C, 0x219F }, { 0x21A1, 0x21A2 }, { 0x21A4, 0x21A5 }, { 0x21A7, 0x21AD },
  { 0x21AF, 0x21CD }, { 0x21D0, 0x21D1 }, { 0x21D3, 0x21D3 }, { 0x21D5, 0x21F3 }, { 0x2300, 0x2307 },
  { 0x230C, 0x231F }, { 0x2322, 0x2328 }, { 0x232B, 0x237B }, { 0x237D, 0x239A }, { 0x23B4, 0x23DB },
  { 0x23E2, 0x2426 }, { 0x2440, 0x244A }, { 0x249C, 0x24E9 }, { 0x2500, 0x25B6 }, { 0x25B8, 0x25C0 },
  { 0x25C2, 0x25F7 }, { 0x2600, 0x266E }, { 0x2670, 0x2767 }, { 0x2794, 0x27BF }, { 0x2800, 0x28FF },
  { 0x2B00, 0x2B2F }, { 0x2B45, 0x2B46 }, { 0x2B4D, 0x2B73 }, { 0x2B76, 0x2B95 }, { 0x2B97, 0x2BFF },
  { 0x1F000, 0x1F02B }, { 0x1F030, 0x1F093 }, { 0x1F0A0, 0x1F0AE }, { 0x1F0B1, 0x1F0BF }, { 0x1F0C1, 0x1F0CF },
  { 0x1F0D1, 0x1F0F5 }, { 0x1F10D, 0x1F1AD }, { 0x1F1E6, 0x1F202 }, { 0x1F210, 0x1F23B }, { 0x1F240, 0x1F248 },
  { 0x1F250, 0x1F251 }, { 0x1F260, 0x1F265 }, { 0x1F300, 0x1F6D7 }, { 0x1F6DC, 0x1F6EC }, { 0x1F6F0, 0x1F6FC },
  { 0x1F700, 0x1F776 }, { 0x1F77B, 0x1F7D9 }, { 0x1F7E0, 0x1F7EB }, { 0x1F7F0, 0x1F7F0 }, { 0x1F800, 0x1F80B },
  { 0x1F810, 0x1F847 }, { 0x1F850, 0x1F859 }, { 0x1F860, 0x1F887 }, { 0x1F890, 0x1F8AD }, { 0x1F8B0, 0x1F8B1 },
  { 0x1F900, 0x1FA53 }, { 0x1FA60, 0x1FA6D }, { 0x1FA70, 0x1FA7C }, { 0x1FA80, 0x1FA88 }, { 0x1FA90, 0x1FABD },
  { 0x1FABF, 0x1FAC5 }, { 0x1FACE, 0x1FADB }, { 0x1FAE0, 0x1FAE8 }, { 0x1FAF0, 0x1FAF8 },
}

local function within(cp, ranges)
  local lo, hi = 1, #ranges
  while lo <= hi do
    local mid = math.floor((lo + hi) / 2)
    local r = ranges[mid]
    if cp < r[1] then
      hi = mid - 1
    elseif cp > r[2] then
      lo = mid + 1
    else
      return true
    end
  end
  return false
end

--- Hidden by itself (tab, line feed, carriage return and the joiner are `find`'s to decide).
local function alone(cp)
  if cp == 9 or cp == 10 or cp == 13 or cp == 0x200D then
    return false
  end
  -- The noncharacters (U+FDD0..U+FDEF, U+xFFFE and U+xFFFF of every plane): unassigned, and for good.
  if (cp >= 0xFDD0 and cp <= 0xFDEF) or cp % 0x10000 >= 0xFFFE then
    return true
  end
  return within(cp, HIDDEN)
end

local function variation_selector(cp)
  return cp ~= nil and ((cp >= 0xFE00 and cp <= 0xFE0F) or (cp >= 0xE0100 and cp <= 0xE01EF))
end

local function continuation(b)
  return b ~= nil and b >= 0x80 and b <= 0xBF
end

--- The code point at byte `i` of `s` and the byte after it; nil for a byte that does not start one (Neovim
--- shows such a byte as <xx> by itself). A surrogate's three bytes decode to it (a lone one, from JSON).
local function decode(s, i)
  local c = byte(s, i)
  if c < 0x80 then
    return c, i + 1
  elseif c >= 0xC2 and c <= 0xDF then
    local c2 = byte(s, i + 1)
    if continuation(c2) then
      return (c - 0xC0) * 0x40 + (c2 - 0x80), i + 2
    end
  elseif c >= 0xE0 and c <= 0xEF then
    local c2, c3 = byte(s, i + 1, i + 2)
    if continuation(c2) and continuation(c3) then
      local cp = ((c - 0xE0) * 0x40 + (c2 - 0x80)) * 0x40 + (c3 - 0x80)
      if cp >= 0x800 then
        return cp, i + 3
      end
    end
  elseif c >= 0xF0 and c <= 0xF4 then
    local c2, c3, c4 = byte(s, i + 1, i + 3)
    if continuation(c2) and continuation(c3) and continuation(c4) then
      local cp = (((c - 0xF0) * 0x40 + (c2 - 0x80)) * 0x40 + (c3 - 0x80)) * 0x40 + (c4 - 0x80)
      if cp >= 0x10000 and cp <= 0x10FFFF then
        return cp, i + 4
      end
    end
  end
  return nil, i + 1
end

--- How a hidden character is shown, as the server names it in a rating's reason: `<U+202E>`.
---@param cp integer
---@return string
function M.marker(cp)
  return string.format("<U+%04X>", cp)
end

-- Bytes that may start a hidden character: none in printable ASCII, most code.
local SUSPECT = "[%z\1-\8\11-\31\127-\255]"

--- The hidden characters of `text`, in order, as the server's `hidden` finds them: {from, to, cp} with
--- `from` the first byte (1-based) and `to` the byte after it. A carriage return directly before a line
--- feed is a Windows line end, not hidden.
---@param text string
---@return {[1]: integer, [2]: integer, [3]: integer}[]
function M.find(text)
  local found = {}
  if not text:find(SUSPECT) then
    return found
  end
  -- `prev` and `prev2`: the two code points before this one (false at the start of the text).
  local i, n, prev, prev2 = 1, #text, false, false
  while i <= n do
    local cp, after = decode(text, i)
    local hide = false
    if cp == 13 then
      hide = byte(text, after) ~= 10
    elseif cp == 0x200D then
      -- Inside an emoji sequence: a symbol before it (after its variation selector, if it has one and is
      -- not itself at the start) and a symbol after it.
      local before = (prev2 and variation_selector(prev)) and prev2 or prev
      local next_cp = after <= n and decode(text, after) or nil
      hide = not (before and next_cp and within(before, SYMBOLS) and within(next_cp, SYMBOLS))
    elseif cp then
      hide = alone(cp)
    end
    if hide then
      found[#found + 1] = { i, after, cp }
    end
    -- A byte that starts no code point is a character too: nil is kept as false (never a symbol).
    prev, prev2, i = cp or false, prev, after
  end
  return found
end

--- Whether `text` holds a hidden character.
---@param text string
---@return boolean
function M.any(text)
  return text:find(SUSPECT) ~= nil and #M.find(text) > 0
end

--- One line as it is shown: each hidden character replaced by its marker. `ended`: a line feed followed
--- the line where it came from, so a carriage return at its end is a Windows line end, left out (shown as
--- the line end it is). Also returns the markers' byte columns in the shown line ({start, end}, 0-based,
--- end-exclusive), nil when there are none.
---@param line string
---@param ended boolean|nil
---@return string, {[1]: integer, [2]: integer}[]|nil
function M.show(line, ended)
  local trail = ended and byte(line, -1) == 13
  if not trail and not line:find(SUSPECT) then
    return line, nil
  end
  local found = M.find(ended and (line .. "\n") or line)
  local parts, spans, at, col = {}, {}, 1, 0
  for _, f in ipairs(found) do
    local piece = line:sub(at, f[1] - 1)
    local marker = M.marker(f[3])
    parts[#parts + 1] = piece
    parts[#parts + 1] = marker
    col = col + #piece
    spans[#spans + 1] = { col, col + #marker }
    col = col + #marker
    at = f[2]
  end
  parts[#parts + 1] = line:sub(at, trail and #line - 1 or #line)
  return table.concat(parts), #spans > 0 and spans or nil
end

--- `line` as virtual text chunks (a virtual line): its text in `group`, each hidden character a marker in
--- InterpreterHidden. `ended` as for `show`.
---@param line string
---@param group string
---@param ended boolean|nil
---@return {[1]: string, [2]: string}[]
function M.chunks(line, group, ended)
  local text, spans = M.show(line, ended)
  if not spans then
    return { { text, group } }
  end
  local chunks, at = {}, 0
  for _, span in ipairs(spans) do
    if span[1] > at then
      chunks[#chunks + 1] = { text:sub(at + 1, span[1]), group }
    end
    chunks[#chunks + 1] = { text:sub(span[1] + 1, span[2]), "InterpreterHidden" }
    at = span[2]
  end
  if at < #text then
    chunks[#chunks + 1] = { text:sub(at + 1), group }
  end
  return chunks
end

local ns = vim.api.nvim_create_namespace("interpreter_lsp_hidden")
M.ns = ns

--- Mark the hidden characters of a buffer the user edits (a proposal's code, before `:w` approves it),
--- without changing its text: what `:w` sends is what the buffer holds. Each character cell (Neovim draws
--- a joiner or a tag after a letter in that letter's cell) holding one is concealed and drawn again as
--- virtual text, its hidden characters as markers. Kept up to date as the user edits. The buffer's windows
--- need 'conceallevel' 2 (and 'concealcursor' "nvic", so the cursor line shows the markers too).
---@param buf integer
function M.watch(buf)
  local function draw()
    if not vim.api.nvim_buf_is_valid(buf) then
      return
    end
    vim.api.nvim_buf_clear_namespace(buf, ns, 0, -1)
    local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
    for row, line in ipairs(lines) do
      -- What `:w` sends joins the lines with line feeds: the last one ends without.
      local found = M.find(row < #lines and (line .. "\n") or line)
      if #found > 0 then
        local k, cell_start = 1, 0
        for _, cell in ipairs(vim.fn.split(line, [[\zs]])) do
          local cell_end = cell_start + #cell
          if k <= #found and found[k][1] - 1 < cell_end then
            local chunks, at = {}, cell_start + 1
            while k <= #found and found[k][1] - 1 < cell_end do
              local f = found[k]
              if f[1] > at then
                chunks[#chunks + 1] = { line:sub(at, f[1] - 1), "Normal" }
              end
              chunks[#chunks + 1] = { M.marker(f[3]), "InterpreterHidden" }
              at, k = f[2], k + 1
            end
            if at <= cell_end then
              chunks[#chunks + 1] = { line:sub(at, cell_end), "Normal" }
            end
            vim.api.nvim_buf_set_extmark(buf, ns, row - 1, cell_start, {
              end_col = cell_end, conceal = "", virt_text = chunks, virt_text_pos = "inline", strict = false,
            })
          end
          cell_start = cell_end
        end
      end
    end
  end
  local pending = false
  vim.api.nvim_buf_attach(buf, false, {
    on_lines = function()
      if not pending then
        pending = true
        vim.schedule(function()
          pending = false
          draw()
        end)
      end
    end,
  })
  draw()
end

return M
