-- The interpreter-lsp protocol names, as server/interpreter_lsp/protocol.py spells them (and
-- docs/protocol.md documents them). tests/test_mirrors.py checks this file against protocol.py.
local M = {}

-- Commands: workspace/executeCommand with one JSON object as the only argument.
M.CHAT = "interpreter.chat"
M.RUN = "interpreter.run"
M.APPROVE = "interpreter.approve"
M.REJECT = "interpreter.reject"
M.APPLY_PROPOSAL = "interpreter.applyProposal"
M.INTERRUPT = "interpreter.interrupt"
M.RESTART_KERNEL = "interpreter.restartKernel"
M.RESET = "interpreter.reset"
M.UNDO = "interpreter.undo"
M.HISTORY = "interpreter.history"
M.VARIABLES = "interpreter.variables"
M.STATUS = "interpreter.status"
M.EXPORT_NOTEBOOK = "interpreter.exportNotebook"
M.SET_TRUSTED = "interpreter.setTrusted"
M.COMPACT = "interpreter.compact"

-- Notifications: server -> client.
M.MESSAGE = "interpreter/message"
M.PROPOSAL = "interpreter/proposal"
M.OUTPUT = "interpreter/output"
M.RUN_STATUS = "interpreter/runStatus"
M.TURN_STATUS = "interpreter/turnStatus"
M.KERNEL_STATUS = "interpreter/kernelStatus"
M.PROPOSAL_STATUS = "interpreter/proposalStatus"

-- Requests: server -> client.
M.INPUT = "interpreter/input"

M.FINAL_RUN_STATES = { ok = true, error = true, interrupted = true, died = true, timeout = true }
M.FINAL_TURN_STATES = { done = true, cancelled = true, error = true }

return M
