-- Minimal init for the Neovim tests: the plugin from this checkout, set up with options from the test.
vim.opt.runtimepath:prepend(vim.env.INTERPRETER_LSP_PLUGIN)
vim.opt.runtimepath:append(vim.env.INTERPRETER_LSP_TESTS)
vim.opt.swapfile = false
vim.opt.shadafile = "NONE"
vim.cmd("runtime plugin/interpreter_lsp.lua")
if vim.env.INTERPRETER_LSP_SETUP and vim.env.INTERPRETER_LSP_SETUP ~= "" then
  require("interpreter_lsp").setup(vim.json.decode(vim.env.INTERPRETER_LSP_SETUP))
end
