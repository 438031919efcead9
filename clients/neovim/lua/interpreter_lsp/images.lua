-- Images in run output: a MIME bundle's image is saved to a file (setup option image_dir, else
-- stdpath("cache")/interpreter_lsp/images) and shown as an "[image] path" line; with image.nvim installed
-- it is also drawn below that line. How images are drawn (setup option `images`) is decided here too:
-- image.nvim, the kitty graphics protocol (kitty.lua), or the path alone. A bundle without an image
-- shows its best text form, else a line saying there is none.
local M = {}

M.MODES = { "auto", "image.nvim", "kitty", "path" }

--- image.nvim's module when it is installed, else nil.
function M.image_nvim()
  local ok, image = pcall(require, "image")
  if ok and type(image) == "table" and type(image.from_file) == "function" then
    return image
  end
  return nil
end

--- How images are drawn now, for setup option `images` ("auto" when nil): "image.nvim" when it is
--- installed (and not turned off), else "kitty" when the terminal shows kitty's Unicode placeholders
--- (auto) or was named (kitty), else "path": the file's path alone. Decided at each image: a terminal
--- UI can attach after startup, and image.nvim can be loaded late.
---@param want string|nil
---@return "image.nvim"|"kitty"|"path"
function M.mode(want)
  want = want or "auto"
  if want == "path" then
    return "path"
  end
  if (want == "auto" or want == "image.nvim") and M.image_nvim() then
    return "image.nvim"
  end
  if want == "kitty" or want == "auto" then
    local kitty = require("interpreter_lsp.kitty")
    if kitty.tui() and (want == "kitty" or kitty.terminal()) then
      return "kitty"
    end
  end
  return "path"
end

--- The image types saved from output, with their file extension.
M.TYPES = { ["image/png"] = "png", ["image/jpeg"] = "jpg", ["image/gif"] = "gif", ["image/svg+xml"] = "svg" }

--- Save an image payload (base64, or the text of an SVG) of `run` to a file; nil when it cannot be.
---@param s interpreter_lsp.Session
---@param mime string one of M.TYPES
---@param payload string
---@param run interpreter_lsp.Run
---@return string|nil path
function M.save(s, mime, payload, run)
  local dir = s.opts.image_dir or (vim.fn.stdpath("cache") .. "/interpreter_lsp/images")
  vim.fn.mkdir(dir, "p")
  local n = (run.section.data.images or 0) + 1
  run.section.data.images = n
  local name = string.format("%s-%d.%s", (run.id or "run"):gsub("[^%w_-]", "_"), n, M.TYPES[mime])
  local path = dir .. "/" .. name
  local bytes = payload
  if mime ~= "image/svg+xml" then
    local ok, decoded = pcall(vim.base64.decode, (payload:gsub("%s", "")))
    if not ok then
      return nil
    end
    bytes = decoded
  end
  local fd = io.open(path, "wb")
  if not fd then
    return nil
  end
  fd:write(bytes)
  fd:close()
  return path
end

local panel_ns = vim.api.nvim_create_namespace("interpreter_lsp_panel_images")

--- Draw the image below its "[image] path" line in the panel once that line is written and the panel
--- is in a window (its width bounds the image): with image.nvim, or as kitty placeholders in virtual
--- lines under the line (gone with the line when a long output is folded over it).
---@param panel interpreter_lsp.Panel
---@param path string
---@param want string|nil setup option `images`
function M.draw_later(panel, path, want)
  local mode = M.mode(want)
  if mode == "path" or (mode == "kitty" and not path:lower():match("%.png$")) then
    return
  end
  panel.on_flush = panel.on_flush or {}
  local function draw()
    local win = panel:window()
    if not win then
      return false
    end
    local lines = vim.api.nvim_buf_get_lines(panel.buf, 0, -1, false)
    for row = #lines, 1, -1 do
      if lines[row] == "[image] " .. path then
        if mode == "image.nvim" then
          -- image.nvim draws below its `y` line (0-based): the "[image]" line.
          local img = M.image_nvim().from_file(path, { window = win, buffer = panel.buf, with_virtual_padding = true,
            x = 0, y = row - 1 })
          if img then
            img:render()
          end
        else
          local kitty = require("interpreter_lsp.kitty")
          local k = kitty.show(path, win, 0)
          if k then
            vim.api.nvim_buf_set_extmark(panel.buf, panel_ns, row - 1, 0, {
              virt_lines = kitty.placeholder_lines(k.id, k.cols, k.rows, ""), invalidate = true, undo_restore = false })
          end
        end
        return true
      end
    end
    return false
  end
  local entry
  entry = function()
    if draw() then
      for i, fn in ipairs(panel.on_flush) do
        if fn == entry then
          table.remove(panel.on_flush, i)
          break
        end
      end
    end
  end
  table.insert(panel.on_flush, entry)
end

--- Text a user can read for a MIME bundle of `run`, and its kind ("muted" or nil): an image becomes a
--- saved file's path; else markdown, else plain text, else a line naming the types.
---@param s interpreter_lsp.Session
---@param data table<string, string|string[]>
---@param run interpreter_lsp.Run
---@return string text, string|nil kind
function M.bundle_text(s, data, run)
  for mime in pairs(M.TYPES) do
    if type(data[mime]) == "string" then
      local path = M.save(s, mime, data[mime], run)
      if path then
        M.draw_later(s.panel, path, s.opts.images)
        return "[image] " .. path .. "\n", "muted"
      end
    end
  end
  local function text_of(v)
    return type(v) == "table" and table.concat(v, "") or v
  end
  if data["text/markdown"] then
    return text_of(data["text/markdown"])
  end
  if data["text/plain"] then
    return text_of(data["text/plain"])
  end
  local mimes = vim.tbl_keys(data)
  table.sort(mimes)
  return "[" .. table.concat(mimes, ", ") .. " output: no text form to show]\n", "muted"
end

return M
