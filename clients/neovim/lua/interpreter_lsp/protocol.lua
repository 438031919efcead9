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
M.REDO = "interpreter.redo"
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

-- Every payload, command argument and result, and history event of protocol.py, field by field: the Lua
-- type, "?" when the server may leave the field out. tests/test_mirrors.py checks it both ways (and prints
-- the table to paste when protocol.py changes).
M.FIELDS = {
  MessageParams = { turnId = "string", seq = "number", delta = "string", done = "boolean" },
  ProposalParams = { proposalId = "string", turnId = "string", language = "string", code = "string", risk = "table", autoRun = "boolean", waitReason = "string?", origin = "string?", agent = "string?", created = "string?" },
  OutputParams = { runId = "string", seq = "number", kind = "string", text = "string?", data = "table?", ename = "string?", evalue = "string?", traceback = "table?" },
  RunStatusParams = { runId = "string", state = "string", durationMs = "number?", language = "string?", message = "string?", turnId = "string?", proposalId = "string?", code = "string?", origin = "string?", agent = "string?", files = "table?", root = "string?", source = "table?" },
  TurnStatusParams = { turnId = "string", state = "string", message = "string?", context = "table?" },
  KernelStatusParams = { language = "string", state = "string", message = "string?" },
  InputParams = { runId = "string", prompt = "string", password = "boolean" },
  ProposalStatusParams = { proposalId = "string", turnId = "string", state = "string", runId = "string?", reason = "string?", uri = "string?" },
  Risk = { level = "string", reasons = "table" },
  ContextUse = { tokens = "number", window = "number", windowSource = "string", replyReserve = "number", cost = "number", costKnown = "boolean", compactions = "number" },
  LspPosition = { line = "number", character = "number" },
  Usage = { promptTokens = "number", completionTokens = "number", cost = "number" },
  KernelInfo = { language = "string", state = "string", kernel = "string", source = "string", sandbox = "string", interpreter = "string?", pid = "number?", limits = "string?", gateway = "string?", kernelId = "string?", filesTouched = "string?" },
  Variable = { name = "string", type = "string", summary = "string" },
  ChatArgs = { text = "string", uri = "string?", range = "table?" },
  ChatResult = { turnId = "string" },
  RunArgs = { code = "string?", language = "string?", uri = "string?", range = "table?", position = "table?", timeout = "number?" },
  RunResult = { runId = "string" },
  ApproveArgs = { proposalId = "string", code = "string?" },
  RejectArgs = { proposalId = "string", reason = "string?" },
  ApplyProposalArgs = { proposalId = "string", uri = "string?", range = "table?" },
  ApplyProposalResult = { applied = "boolean" },
  LanguageArgs = { language = "string?", uri = "string?" },
  WorkspaceArgs = { uri = "string?" },
  UndoArgs = { uri = "string?", dryRun = "boolean?", confirm = "boolean?" },
  UndoResult = { request = "string?", runs = "table", notRestorable = "table", restored = "table?", removed = "table?", dryRun = "boolean?", restore = "table?", remove = "table?", changedSince = "table?", running = "table?", variablesRestored = "table?", variablesRemoved = "table?", variablesRestore = "table?", variablesRemove = "table?" },
  RedoArgs = { uri = "string?", dryRun = "boolean?" },
  HistoryResult = { messages = "table" },
  VariablesResult = { variables = "table" },
  StatusResult = { version = "string", protocolVersion = "number", root = "string", model = "string?", autoRun = "boolean", autoRunMaxRisk = "table", usage = "table", kernels = "table", trusted = "boolean", settingsErrors = "table", settingsIgnored = "table", settingsSources = "table", workspaces = "table", context = "table?", agentsWaiting = "table?" },
  ExportNotebookArgs = { path = "string", overwrite = "boolean?", uri = "string?", verify = "boolean?", verifyTimeout = "number?" },
  ExportNotebookResult = { path = "string", verification = "table?" },
  SetTrustedArgs = { trusted = "boolean" },
  CompactResult = { summaryTokens = "number", droppedTurns = "number" },
  UserEvent = { turnId = "string", text = "string", content = "string", uri = "string?", range = "table?" },
  AssistantEvent = { turnId = "string", text = "string", partial = "boolean?", toolCalls = "table?" },
  ProposalEvent = { proposalId = "string", turnId = "string", language = "string", code = "string", risk = "table", autoRun = "boolean", complete = "boolean", toolCallId = "string?", codeHash = "string?", origin = "string?", agent = "string?" },
  DecisionEvent = { proposalId = "string", turnId = "string", decision = "string", language = "string?", code = "string?", edited = "boolean?", reason = "string?", uri = "string?", codeHash = "string?", agent = "string?" },
  RunEvent = { runId = "string", origin = "string", language = "string", code = "string", state = "string", durationMs = "number", outputForModel = "string", outputs = "table", files = "table", turnId = "string?", proposalId = "string?", message = "string?", codeHash = "string?", agent = "string?" },
  UsageEvent = { turnId = "string", promptTokens = "number", completionTokens = "number", cost = "number" },
  NoteEvent = { text = "string", turnId = "string?", forModel = "string?" },
  ErrorEvent = { turnId = "string", message = "string" },
  AppliedEvent = { proposalId = "string", uri = "string", applied = "boolean" },
  TurnEndEvent = { turnId = "string", state = "string", message = "string?" },
  KernelEvent = { language = "string", state = "string", message = "string" },
  CompactionEvent = { summary = "string", upTo = "string", summaryTokens = "number?", turns = "number?", failed = "string?" },
  UndoEvent = { runId = "string?" },
}

return M
