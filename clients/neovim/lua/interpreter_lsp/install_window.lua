-- The install's window: what :InterpreterInstall says, whole, and pip's output as it comes, in a buffer of
-- its own (interpreter://install) shown in a small split, with the time so far in its window bar. The
-- messages themselves are one line each (install.lua): a long or many-line message would stop the editor
-- at "Press ENTER", and the install would look stuck until the user pressed it.
local M = { buf = nil, started = nil }

function M.buffer()
  if not (M.buf and vim.api.nvim_buf_is_valid(M.buf)) then
    M.buf = vim.api.nvim_create_buf(false, true)
    vim.bo[M.buf].bufhidden = "hide"
    pcall(vim.api.nvim_buf_set_name, M.buf, "interpreter://install")
    vim.keymap.set("n", "q", "<Cmd>close<CR>", { buffer = M.buf, desc = "Interpreter: close (the install goes on)" })
  end
  return M.buf
end

function M.show()
  local buf = M.buffer()
  if #vim.fn.win_findbuf(buf) == 0 then
    local ok, win = pcall(vim.api.nvim_open_win, buf, false, { split = "below", win = -1, height = 8 })
    if ok then
      vim.wo[win].winfixheight = true
      vim.wo[win].number = false
      vim.wo[win].wrap = true
    end
  end
  M.bar()
end

function M.bar(done)
  local secs = M.started and (vim.uv.hrtime() - M.started) / 1e9 or 0
  local text = done and (" interpreter-lsp install: " .. done) or string.format(" installing interpreter-lsp · %d s · q hides this (the install goes on)", secs)
  for _, win in ipairs(vim.fn.win_findbuf(M.buffer())) do
    vim.wo[win].winbar = text:gsub("%%", "%%%%")
  end
end

function M.add(lines)
  local buf = M.buffer()
  local count = vim.api.nvim_buf_line_count(buf)
  local first = (count == 1 and vim.api.nvim_buf_get_lines(buf, 0, 1, false)[1] == "") and 0 or count
  vim.api.nvim_buf_set_lines(buf, first, -1, false, lines)
  for _, win in ipairs(vim.fn.win_findbuf(buf)) do
    pcall(vim.api.nvim_win_set_cursor, win, { vim.api.nvim_buf_line_count(buf), 0 })
  end
  M.bar()
end

--- The buffer's lines (what the install said, whole).
function M.lines()
  return vim.api.nvim_buf_get_lines(M.buffer(), 0, -1, false)
end

return M
