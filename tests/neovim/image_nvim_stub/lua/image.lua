-- A stand-in for image.nvim (require("image")), put on the runtimepath by the tests that need it: it
-- draws nothing and records each from_file call (the path and the options) in _G.image_calls, with
-- how many times that image was rendered and cleared.
_G.image_calls = _G.image_calls or {}

local M = {}

function M.from_file(path, opts)
  opts = opts or {}
  local rec = {
    path = path,
    buffer = opts.buffer,
    window = opts.window,
    x = opts.x,
    y = opts.y,
    with_virtual_padding = opts.with_virtual_padding == true,
    render_offset_top = opts.render_offset_top,
    rendered = 0,
    cleared = 0,
  }
  table.insert(_G.image_calls, rec)
  return {
    render = function()
      rec.rendered = rec.rendered + 1
    end,
    clear = function()
      rec.cleared = rec.cleared + 1
    end,
  }
end

return M
