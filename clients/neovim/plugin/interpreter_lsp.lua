-- User commands of interpreter_lsp (defined in lua/interpreter_lsp/commands.lua). Nothing starts until
-- setup() or the first command.
if vim.g.loaded_interpreter_lsp then
  return
end
vim.g.loaded_interpreter_lsp = true

require("interpreter_lsp.commands").register()
