-- What the user reads, in Neovim's words: the server writes some sentences for every editor (the way to
-- trust a folder names VS Code's command); here they name the Neovim command. And how a short message is
-- shown: one line that fits the message area, so a message never stops the editor at a hit-enter prompt
-- (the whole text goes to the panel or a float, where it is read).
local M = {}

-- The server's sentences about trust (safety/policy.py), and what a Neovim user does instead.
local REWRITES = {
  -- What to do first: a one-line message cut at the screen's edge still says it.
  { "This workspace is not trusted, so no code runs in it%. Trust the workspace in your editor "
    .. "%(VS Code: Manage Workspace Trust%), then try again%.",
    "This folder is not trusted: :InterpreterTrust, then try again (until then no code runs in it)." },
  { "Trust the workspace in your editor %(VS Code: Manage Workspace Trust%), then try again%.",
    "Run :InterpreterTrust to trust this folder, then try again." },
  { "%(VS Code: Manage Workspace Trust%)", "(:InterpreterTrust)" },
}

--- A server sentence in Neovim's words; a JSON-RPC error code in front ("-32602: ") is dropped.
---@param text string|nil
---@return string
function M.neovim(text)
  text = tostring(text or "")
  text = text:gsub("^%-?%d+: ", "")
  for _, pair in ipairs(REWRITES) do
    text = text:gsub(pair[1], pair[2])
  end
  return text
end

--- One line of `text` that fits the message area (cut with "…").
---@param text string
---@return string
function M.one_line(text)
  local line = (tostring(text):gsub("%s*\n%s*", " · "))
  -- Within the echo area (left of the ruler and showcmd): a longer message would wrap, or scroll with the
  -- one before it, and stop at a hit-enter prompt.
  local room = math.max(20, (vim.v.echospace > 0 and vim.v.echospace or vim.o.columns - 12) - 1)
  if vim.fn.strdisplaywidth(line) > room then
    line = vim.fn.strcharpart(line, 0, room - 1) .. "…"
  end
  return line
end

--- Tell the user in one line (never a hit-enter prompt; never inside an autocommand's error trace).
---@param text string
---@param level integer|nil vim.log.levels
-- What waits to be said: the message area has one line, and several messages in a moment (a run command
-- repeated while refused, a key held) would need more: Neovim then stops everything at "Press ENTER".
-- Those said within SAY_WINDOW_MS share one line: the most severe, the latest of them (each is in full in
-- the panel).
local SAY_WINDOW_MS = 30
local pending = nil

function M.say(text, level)
  local line = M.one_line("interpreter_lsp: " .. M.neovim(text))
  level = level or vim.log.levels.INFO
  local first = pending == nil
  if first or level >= pending.level then
    pending = { line = line, level = level }
  end
  if first then
    vim.defer_fn(function()
      local said = pending
      pending = nil
      vim.notify(said.line, said.level)
    end, SAY_WINDOW_MS)
  end
end

return M
