-- The user commands (:Interpreter, :InterpreterRun, ...): their arguments, ranges, completion and
-- descriptions, each calling the Lua API (init.lua). Loading this file loads nothing else, so defining
-- the commands at startup starts nothing.
local M = {}

local function api()
  return require("interpreter_lsp")
end

local function range_of(cmd)
  if cmd.range > 0 then
    return cmd.line1, cmd.line2
  end
  return nil, nil
end

--- The user commands: name -> {callback, options}.
local commands = {
  Interpreter = {
    function(cmd)
      local line1, line2 = range_of(cmd)
      api().chat({ text = cmd.args, line1 = line1, line2 = line2 })
    end,
    { nargs = "*", range = true, desc = "Ask the model (a range: the selected lines are the context)" },
  },
  InterpreterRun = {
    function(cmd)
      local line1, line2 = range_of(cmd)
      api().run({ line1 = line1, line2 = line2 })
    end,
    { range = true, desc = "Run the range, else the # %% cell, else the line" },
  },
  InterpreterApprove = { function() api().approve() end, { desc = "Approve the pending proposal" } },
  InterpreterReject = {
    function(cmd) api().reject(cmd.args) end,
    { nargs = "*", desc = "Reject the pending proposal, with an optional reason for the model" },
  },
  InterpreterEdit = { function() api().edit() end, { desc = "Edit the pending proposal; :w approves it" } },
  InterpreterApply = {
    function(cmd)
      local line1, line2 = range_of(cmd)
      api().apply({ line1 = line1, line2 = line2 })
    end,
    { range = true, desc = "Write the pending proposal into the buffer: over the range, else below the cursor line" },
  },
  InterpreterInterrupt = { function() api().interrupt() end, { desc = "Interrupt the run, stop the model" } },
  InterpreterRestart = {
    function(cmd) api().restart(cmd.args) end,
    {
      nargs = "?",
      complete = function(arglead) return api().languages(arglead) end,
      desc = "Restart a kernel (default: the current buffer's language, else python)",
    },
  },
  InterpreterReset = { function() api().reset() end, { desc = "Start a new conversation" } },
  InterpreterUndo = { function() api().undo() end, { desc = "Drop the last request and what followed" } },
  InterpreterRedo = { function() api().redo() end, { desc = "Take back the last undo: bring the request back" } },
  InterpreterPanel = { function() api().toggle_panel() end, { desc = "Toggle the interpreter panel" } },
  InterpreterOutput = { function() api().show_output() end, { desc = "All output of the last run" } },
  InterpreterClearOutput = {
    function(cmd)
      local line1, line2 = range_of(cmd)
      api().clear_output({ line1 = line1, line2 = line2 })
    end,
    { range = true, desc = "Remove the output under the code (the range's cells), images too; the panel keeps it" },
  },
  InterpreterVariables = {
    function(cmd) api().variables(cmd.args) end,
    { nargs = "?", desc = "Show the kernel's variables" },
  },
  InterpreterStatus = { function() api().status() end, { desc = "Model, kernels and token usage" } },
  InterpreterTrust = { function() api().trust() end, { desc = "Trust this workspace folder: code may run in it" } },
  InterpreterUntrust = { function() api().untrust() end, { desc = "Withdraw trust in this folder: nothing runs" } },
  InterpreterCompact = { function() api().compact() end, { desc = "Condense the earlier turns of the conversation" } },
  InterpreterExport = {
    function(cmd) api().export(cmd.args) end,
    { nargs = 1, complete = "file", desc = "Export the conversation as a notebook" },
  },
  InterpreterVerify = {
    function(cmd) api().export_verified(cmd.args) end,
    { nargs = 1, complete = "file", desc = "Export as a notebook and re-run it in a fresh kernel: does it reproduce?" },
  },
  InterpreterInstall = {
    function(cmd)
      require("interpreter_lsp.install").install({ force = cmd.bang, source = cmd.args ~= "" and cmd.args or nil })
    end,
    { bang = true, nargs = "?", complete = "file",
      desc = "Install the server into its own environment (! reinstalls; from a clone, a .whl or a git URL if given)" },
  },
}

M.commands = commands

--- Define every user command (plugin/interpreter_lsp.lua does, at startup).
function M.register()
  for name, spec in pairs(commands) do
    vim.api.nvim_create_user_command(name, spec[1], spec[2])
  end
end

return M
