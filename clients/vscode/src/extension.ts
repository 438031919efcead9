// The extension host: a thin layer that starts the server, maps VS Code commands to the protocol's commands,
// and shows what the server says in the panel and the status bar. All policy lives in the server.

import * as path from "node:path";
import * as vscode from "vscode";
import { InterpreterClient, errorMessage } from "./client";
import { compactionFailedNotice, compactionNotice, describeRange, isBusy, pendingProposals, type PanelEvent } from "./conversation";
import { ConversationPanel, VIEW_ID } from "./panel";
import type { PanelToHost } from "./panelMessages";
import {
  Commands,
  FINAL_TURN_STATES,
  type CompactResult,
  type ExportNotebookResult,
  type HistoryResult,
  type KernelState,
  type LspRange,
  type ProposalParams,
  type RunArgs,
  type StatusResult,
  type UndoResult,
  type Variable,
} from "./protocol";
import { ProposalDocuments } from "./proposals";
import { ServerNotFoundError } from "./serverCommand";
import { kernelNewsNotice, redoNotice, undoNotice, verificationSummary } from "./statusText";
import { ServerInstaller } from "./serverInstallUi";
import { KernelStatusBar } from "./statusBar";

/** The protocol's language for a VS Code language id (for display; the server maps documents itself). */
function protocolLanguage(languageId: string): string {
  return languageId === "shellscript" ? "shell" : languageId;
}

function describeSelection(document: vscode.TextDocument, range: vscode.Range): string {
  const name = vscode.workspace.asRelativePath(document.uri, false);
  const { start, end } = range;
  return describeRange(name, { start: { line: start.line, character: start.character }, end: { line: end.line, character: end.character } });
}

/** `relative` (with "/" separators) inside `folder`, or undefined when it would lead outside it. */
function resolveInFolder(folder: vscode.Uri, relative: string): vscode.Uri | undefined {
  const parts = relative.split("/").filter((p) => p !== "" && p !== ".");
  if (!parts.length || parts.includes("..") || path.isAbsolute(relative)) return undefined;
  return vscode.Uri.joinPath(folder, ...parts);
}

/** Keys of notices about a condition (conversation.ts NoticeEntry.key). */
const SERVER_MISSING = "server-missing";
const UNTRUSTED = "untrusted";
const NOTHING_TO_REDO = "nothing-to-redo";

class Extension implements vscode.Disposable {
  private readonly output = vscode.window.createOutputChannel("Interpreter");
  private readonly documents = new ProposalDocuments();
  private readonly panel: ConversationPanel;
  private readonly statusBar: KernelStatusBar;
  private readonly client: InterpreterClient;
  private readonly installer: ServerInstaller;
  private readonly disposables: vscode.Disposable[] = [];
  private awaitingFirstNews = false;
  /** Each kernel's last state, to tell a restart the user did not ask for (settings changed) from one they did. */
  private readonly kernelStates = new Map<string, KernelState>();
  /** Error toasts still on screen, by text: the same failure again does not stack another. */
  private readonly openToasts = new Set<string>();

  constructor(context: vscode.ExtensionContext) {
    this.panel = new ConversationPanel(context.extensionUri, (message) => this.onPanelMessage(message));
    this.statusBar = new KernelStatusBar((line) => this.panel.setKernelLine(line));
    const push = (event: PanelEvent): void => this.panel.push(event);
    this.installer = new ServerInstaller(context, this.output, () => this.guard(() => this.client.restart()));
    this.client = new InterpreterClient(this.output, {
      message: (params) => push({ type: "message", params }),
      proposal: (params) => {
        push({ type: "proposal", params });
        this.statusBar.proposal(params);
      },
      output: (params) => push({ type: "output", params }),
      runStatus: (params) => push({ type: "runStatus", params }),
      turnStatus: (params) => {
        push({ type: "turnStatus", params });
        if (params.context) this.statusBar.setContext(params.context);
        // Settings (the model) arrive just after initialize: the first news refreshes the status bar, and
        // each finished turn refreshes the usage.
        if (this.takeFirstNews() || FINAL_TURN_STATES.has(params.state)) void this.refreshStatus();
      },
      kernelStatus: (params) => {
        const previous = this.kernelStates.get(params.language);
        this.kernelStates.set(params.language, params.state);
        // A kernel stopped and started afresh without a Restart from the user: its settings changed (the
        // sandbox, the interpreter, a gateway). Its variables are gone: the panel says so where it is read.
        if (previous === "stopped" && params.state === "starting") {
          push({
            type: "notice",
            level: "warning",
            text: `The ${params.language} kernel is starting afresh because its settings changed (sandbox, environment, interpreter, limits or gateway): its variables and imports are gone.`,
          });
        }
        // A running kernel's news that its state does not show (a gateway connection lost, then restored).
        const news = kernelNewsNotice(previous, params);
        if (news) push({ type: "notice", level: news.level, text: news.text });
        const cameUp = this.statusBar.kernel(params);
        if (this.takeFirstNews() || cameUp) void this.refreshStatus();
      },
      proposalStatus: (params) => {
        push({ type: "proposalState", params });
        this.statusBar.proposalDone(params.proposalId);
        if (params.state !== "approved" && params.state !== "auto-run") void this.documents.closeEdit(params.proposalId);
      },
      serverCommand: (command, args, send) => this.serverCommand(command, args, send),
      configurationRead: () => this.scheduleStatusRefresh(),
      starting: () => this.statusBar.setServerState("starting"),
      started: () => this.onServerStarted(),
      stopped: () => {
        this.statusBar.setServerState("stopped");
        push({ type: "serverStopped" });
      },
    }, (input) => this.installer.resolve(input));
  }

  activate(): void {
    const command = (id: string, handler: (...args: unknown[]) => unknown): void => {
      this.disposables.push(vscode.commands.registerCommand(id, (...args: unknown[]) => this.guard(() => handler(...args))));
    };
    this.disposables.push(
      this.output,
      this.documents,
      this.panel,
      this.statusBar,
      this.client,
      vscode.window.registerWebviewViewProvider(VIEW_ID, this.panel),
      this.panel.onDidChange(() => this.updateContextKeys()),
      vscode.workspace.onDidGrantWorkspaceTrust(() => {
        // Told, not restarted: a waiting proposal stays and becomes approvable, and its card says so.
        this.output.appendLine("Workspace trusted: telling the server it may run code.");
        void this.guard(async () => {
          await this.client.command(Commands.setTrusted, { trusted: true });
          this.panel.push({ type: "dismiss", key: UNTRUSTED });
          this.panel.push({ type: "trusted" });
          this.panel.push({ type: "notice", level: "info", text: "The workspace is trusted now: code can run." });
          await this.refreshStatus();
        });
      }),
      vscode.workspace.onDidChangeConfiguration((event) => {
        if (event.affectsConfiguration("interpreter.server")) void this.guard(() => this.client.restart());
        else if (event.affectsConfiguration("interpreter")) void this.refreshStatus();
      }),
    );
    command("interpreterLsp.chat", (text?: unknown) => this.chat(typeof text === "string" ? text : undefined));
    command("interpreterLsp.askAboutSelection", () => this.askAboutSelection());
    command("interpreterLsp.runSelection", () => this.runSelection());
    command("interpreterLsp.approve", (id?: unknown) => this.approve(typeof id === "string" ? id : undefined));
    command("interpreterLsp.reject", (id?: unknown) => this.reject(typeof id === "string" ? id : undefined));
    command("interpreterLsp.interrupt", () => this.client.command(Commands.interrupt));
    command("interpreterLsp.restartKernel", () => this.restartKernel());
    command("interpreterLsp.reset", () => this.reset());
    command("interpreterLsp.undo", () => this.undo());
    command("interpreterLsp.redo", () => this.redo());
    command("interpreterLsp.showVariables", () => this.showVariables());
    command("interpreterLsp.exportNotebook", () => this.exportNotebook());
    command("interpreterLsp.exportVerifiedNotebook", () => this.exportNotebook(true));
    command("interpreterLsp.compact", () => this.compact());
    command("interpreterLsp.showPanel", () => this.panel.reveal(true));
    command("interpreterLsp.statusMenu", () => this.statusMenu());
    command("interpreterLsp.showLogs", () => this.output.show(true));
    command("interpreterLsp.restartServer", () => this.client.restart());
    command("interpreterLsp.installServer", () => this.installer.installAndRestart());
    void this.guard(() => this.client.start());
  }

  /**
   * A server command VS Code runs for the server (a "Run cell" code lens, a code action). A run shows the
   * panel (without taking focus) so its output is seen; a refusal (an untrusted workspace) is said once,
   * in the panel and one toast, in the server's words.
   */
  private async serverCommand(command: string, _args: unknown[], send: () => Promise<unknown>): Promise<unknown> {
    if (command === Commands.run) void this.panel.reveal(false);
    let result: unknown;
    await this.guard(async () => {
      result = await send();
    });
    return result;
  }

  /**
   * Runs a command; a failure is shown to the user (toast and panel), never thrown into VS Code. The same
   * failure again is said once: its panel notice moves to the end instead of repeating, and no second toast
   * stacks on one still shown. A refusal because the workspace is not trusted offers to manage the trust.
   */
  private async guard(action: () => unknown): Promise<void> {
    try {
      await action();
    } catch (error) {
      const message = errorMessage(error);
      this.output.appendLine(`Error: ${message}`);
      const untrusted = !vscode.workspace.isTrusted && /not trusted/i.test(message);
      const key = error instanceof ServerNotFoundError ? SERVER_MISSING : untrusted ? UNTRUSTED : `error:${message}`;
      this.panel.push({ type: "notice", level: "error", text: message, key });
      if (error instanceof ServerNotFoundError) return void this.installer.offer(error); // its own notification
      if (this.openToasts.has(message)) return;
      this.openToasts.add(message);
      const action = untrusted ? "Manage Workspace Trust" : "Show Log";
      // Not awaited: the toast stays until dismissed, and the caller must go on (e.g. restore buttons).
      void vscode.window.showErrorMessage(`Interpreter: ${message}`, action).then((choice) => {
        this.openToasts.delete(message);
        if (choice === "Show Log") this.output.show(true);
        else if (choice === "Manage Workspace Trust") void vscode.commands.executeCommand("workbench.trust.manage");
      });
    }
  }

  /** True for the server's first notification since it started: its settings (the model) are read by then. */
  private takeFirstNews(): boolean {
    const first = this.awaitingFirstNews;
    this.awaitingFirstNews = false;
    return first;
  }

  private statusTimer: NodeJS.Timeout | undefined;

  /**
   * The server just read the settings (`workspace/configuration`): ask for its status once it has applied
   * them, so a new model shows at once. Debounced: one refresh for a burst of questions.
   */
  private scheduleStatusRefresh(): void {
    if (this.statusTimer) clearTimeout(this.statusTimer);
    this.statusTimer = setTimeout(() => {
      this.statusTimer = undefined;
      void this.refreshStatus();
    }, 250);
  }

  private onServerStarted(): void {
    this.awaitingFirstNews = true;
    this.kernelStates.clear();
    this.statusBar.setServerState("running");
    // A server runs now: "not found" is over (after an install, a changed setting, a repair).
    this.panel.push({ type: "dismiss", key: SERVER_MISSING });
    this.contextRetries = 0;
    void this.refreshStatus();
    // After a window reload the panel is empty: the conversation comes back from the server's history.
    if (this.onlyNotices()) void this.loadHistory();
  }

  /** The panel holds no conversation: nothing, or only notices (e.g. one from a failed start). */
  private onlyNotices(): boolean {
    return this.panel.state.entries.every((e) => e.kind === "notice");
  }

  private contextRetries = 0;
  private contextTimer: NodeJS.Timeout | undefined;

  private async refreshStatus(): Promise<void> {
    try {
      const status = await this.client.command<StatusResult>(Commands.status);
      this.statusBar.setStatus(status);
      // The context meter needs the model library, which the server loads in the background after a start:
      // until then status has a model but no `context`. Ask again, less and less often, for about a minute.
      if (this.contextTimer) clearTimeout(this.contextTimer);
      this.contextTimer = undefined;
      if (status.model && !status.context && this.contextRetries < 8) {
        const delay = 1000 * 2 ** Math.min(this.contextRetries, 4);
        this.contextRetries += 1;
        this.contextTimer = setTimeout(() => void this.refreshStatus(), delay);
      }
    } catch (error) {
      this.output.appendLine(`interpreter.status: ${errorMessage(error)}`);
    }
  }

  private async loadHistory(): Promise<void> {
    try {
      const history = await this.client.command<HistoryResult>(Commands.history);
      // Something may have happened meanwhile (a run, a chat): the history holds it too, or it is newer.
      if (history.messages?.length && this.onlyNotices()) {
        this.panel.push({ type: "history", messages: history.messages });
      }
    } catch (error) {
      this.output.appendLine(`interpreter.history: ${errorMessage(error)}`);
    }
  }

  private updateContextKeys(): void {
    const state = this.panel.state;
    void vscode.commands.executeCommand("setContext", "interpreterLsp.busy", isBusy(state));
    void vscode.commands.executeCommand("setContext", "interpreterLsp.awaitingApproval", pendingProposals(state).length > 0);
  }

  private onPanelMessage(message: Exclude<PanelToHost, { type: "ready" }>): void {
    switch (message.type) {
      case "chat":
        void this.guard(() => this.sendChat(message.text));
        return;
      case "interrupt":
        void this.guard(() => this.client.command(Commands.interrupt));
        return;
      case "approve":
        void this.guardProposal(message.proposalId, () => this.approve(message.proposalId));
        return;
      case "reject":
        void this.guardProposal(message.proposalId, () => this.reject(message.proposalId));
        return;
      case "edit":
        void this.guardProposal(message.proposalId, () => this.edit(message.proposalId));
        return;
      case "insert":
        void this.guardProposal(message.proposalId, () => this.insert(message.proposalId));
        return;
      case "openFile":
        void this.guard(() => this.openTouchedFile(message.path));
        return;
    }
  }

  /**
   * Opens a file a run touched. The server reports paths relative to its workspace root but not which
   * root (several folders may be open): the first workspace folder that holds the file wins.
   */
  private async openTouchedFile(relative: string): Promise<void> {
    const folders = vscode.workspace.workspaceFolders ?? [];
    for (const folder of folders) {
      const uri = resolveInFolder(folder.uri, relative);
      if (!uri) continue;
      try {
        await vscode.workspace.fs.stat(uri);
      } catch {
        continue;
      }
      await vscode.window.showTextDocument(uri, { preview: true });
      return;
    }
    throw new Error(`${relative} is not in the workspace any more (moved or deleted since the run).`);
  }

  /** Like guard, and puts the proposal's buttons back when the action did not go through. */
  private async guardProposal(proposalId: string, action: () => Promise<boolean>): Promise<void> {
    let done = false;
    await this.guard(async () => {
      done = await action();
    });
    const entry = this.findProposal(proposalId);
    if (!done && entry) this.panel.push({ type: "proposalStatus", proposalId, status: "pending" });
  }

  private findProposal(proposalId: string): ProposalParams | undefined {
    const entry = this.panel.state.entries.find((e) => e.kind === "proposal" && e.proposal.proposalId === proposalId);
    return entry?.kind === "proposal" ? entry.proposal : undefined;
  }

  private async chat(text?: string): Promise<void> {
    const message =
      text ??
      (await vscode.window.showInputBox({ title: "Interpreter: Chat", prompt: "What should the interpreter do?", ignoreFocusOut: true }));
    if (!message?.trim()) return;
    await this.sendChat(message.trim());
  }

  private async sendChat(text: string, uri?: string, range?: LspRange, context?: string): Promise<void> {
    this.panel.push({ type: "user", text, ...(context ? { context } : {}) });
    await this.panel.reveal(false);
    await this.client.command<{ turnId: string }>(Commands.chat, { text, ...(uri ? { uri, range } : {}) });
  }

  private async askAboutSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor || editor.selection.isEmpty) {
      await vscode.window.showInformationMessage("Select some code first, then ask about it.");
      return;
    }
    const context = describeSelection(editor.document, editor.selection);
    const text = await vscode.window.showInputBox({ title: `Ask about ${context}`, prompt: "Your question or request", ignoreFocusOut: true });
    if (!text?.trim()) return;
    const converter = this.client.converter;
    await this.sendChat(
      text.trim(),
      converter ? converter.asUri(editor.document.uri) : editor.document.uri.toString(),
      converter ? converter.asRange(editor.selection) : undefined,
      `About ${context}`,
    );
  }

  private async runSelection(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      await vscode.window.showInformationMessage("Open a file, select code (or put the cursor in a # %% cell), then run it.");
      return;
    }
    const document = editor.document;
    const converter = this.client.converter;
    const uri = converter ? converter.asUri(document.uri) : document.uri.toString();
    const selection = editor.selection;
    const args: RunArgs = selection.isEmpty
      ? { uri, position: { line: selection.active.line, character: selection.active.character } }
      : { uri, range: converter ? converter.asRange(selection) : undefined };
    const code = selection.isEmpty ? undefined : document.getText(selection);
    await this.panel.reveal(false);
    const { runId } = await this.client.command<{ runId: string }>(Commands.run, args);
    this.panel.push({ type: "runStarted", runId, ...(code !== undefined ? { code } : {}), language: protocolLanguage(document.languageId) });
  }

  /** A proposal for a command that may be given one: the argument, the edited document, or the pending one. */
  private async chooseProposal(proposalId: string | undefined, verb: string): Promise<string | undefined> {
    if (proposalId) return proposalId;
    const edited = this.documents.editedIn(vscode.window.activeTextEditor?.document);
    if (edited) return edited.proposalId;
    const pending = pendingProposals(this.panel.state);
    if (pending.length === 0) {
      await vscode.window.showInformationMessage(`No proposal is waiting to ${verb}.`);
      return undefined;
    }
    if (pending.length === 1) return pending[0].proposalId;
    const pick = await vscode.window.showQuickPick(
      pending.map((p) => ({ label: `${p.language}: ${p.code.split("\n")[0]}`, description: `risk ${p.risk.level}`, proposalId: p.proposalId })),
      { title: `Which proposal to ${verb}?` },
    );
    return pick?.proposalId;
  }

  private async approve(proposalId?: string): Promise<boolean> {
    const id = await this.chooseProposal(proposalId, "run");
    if (!id) return false;
    const code = this.documents.editedCode(id);
    const { runId } = await this.client.command<{ runId: string }>(Commands.approve, { proposalId: id, ...(code !== undefined ? { code } : {}) });
    this.panel.push({ type: "proposalStatus", proposalId: id, status: "running", ...(code !== undefined ? { edited: true } : {}) });
    // The edited code is on its way: its editor (and the ✓ in the title) has done its job.
    await this.documents.closeEdit(id);
    // The run shows the code that ran: the edited code when the user changed it.
    if (code !== undefined) this.panel.push({ type: "runStarted", runId, code });
    return true;
  }

  private async reject(proposalId?: string): Promise<boolean> {
    const id = await this.chooseProposal(proposalId, "reject");
    if (!id) return false;
    await this.client.command(Commands.reject, { proposalId: id });
    this.panel.push({ type: "proposalStatus", proposalId: id, status: "rejected" });
    return true;
  }

  private async edit(proposalId: string): Promise<boolean> {
    const proposal = this.findProposal(proposalId);
    if (!proposal) return false;
    await this.documents.edit(proposalId, proposal.code, proposal.language);
    return false; // the proposal still waits: its buttons come back
  }

  private async insert(proposalId: string): Promise<boolean> {
    const proposal = this.findProposal(proposalId);
    if (!proposal) return false;
    const editor = this.documents.targetEditor();
    const converter = this.client.converter;
    let args: object = { proposalId };
    if (editor) {
      const code = this.documents.editedCode(proposalId) ?? proposal.code;
      if (!(await this.confirm(editor, code))) return false;
      const range = new vscode.Range(editor.selection.start, editor.selection.end);
      args = {
        proposalId,
        uri: converter ? converter.asUri(editor.document.uri) : editor.document.uri.toString(),
        range: converter ? converter.asRange(range) : undefined,
      };
    }
    const result = await this.client.command<{ applied: boolean }>(Commands.applyProposal, args);
    if (!result.applied) {
      this.panel.push({ type: "notice", level: "warning", text: "The proposal was not written into the document (the editor refused the edit)." });
      return false;
    }
    // Written instead of run: the server decided the proposal (its proposalStatus says where).
    const target = editor ? editor.document.uri.toString() : undefined;
    this.panel.push({ type: "proposalStatus", proposalId, status: "applied", ...(target ? { appliedTo: target } : {}) });
    return true;
  }

  private confirm(editor: vscode.TextEditor, code: string): Promise<boolean> {
    return this.documents.confirmReplace(editor, code);
  }

  /** Asks before something that cannot be undone, unless interpreter.confirmDestructive is off. */
  private async confirmDestructive(question: string, detail: string, action: string): Promise<boolean> {
    if (!vscode.workspace.getConfiguration("interpreter").get<boolean>("confirmDestructive", true)) return true;
    const answer = await vscode.window.showWarningMessage(question, { modal: true, detail }, action);
    return answer === action;
  }

  private async restartKernel(): Promise<void> {
    const ok = await this.confirmDestructive(
      "Restart the Python kernel?",
      "Its variables and imports are lost. (Turn this question off with interpreter.confirmDestructive.)",
      "Restart",
    );
    if (!ok) return;
    await this.client.command(Commands.restartKernel);
    this.panel.push({ type: "notice", level: "info", text: "The python kernel restarted: its variables and imports were cleared." });
  }

  private async reset(): Promise<void> {
    const ok = await this.confirmDestructive(
      "Start a new conversation?",
      "The panel is cleared and the model forgets this conversation; the kernel keeps its variables. (Turn this question off with interpreter.confirmDestructive.)",
      "Reset",
    );
    if (!ok) return;
    await this.client.command(Commands.reset);
    this.panel.push({ type: "clear" });
    // The meter and the cost belong to the conversation that just ended: ask for the new one's.
    this.statusBar.clearContext();
    await this.refreshStatus();
  }

  /**
   * Compact Conversation: the model writes the summary, which takes as long as a reply. The panel's
   * activity line and a notification say so while it works; the end says what it did, or that the summary
   * could not be written (those turns were left out instead), never a failure drawn as a success.
   */
  private async compact(): Promise<void> {
    this.panel.push({ type: "compacting", active: true });
    this.panel.follow();
    let result: CompactResult;
    try {
      result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "Interpreter: condensing earlier turns into a summary…" },
        () => this.client.command<CompactResult>(Commands.compact),
      );
    } finally {
      this.panel.push({ type: "compacting", active: false });
    }
    const history = await this.client.command<HistoryResult>(Commands.history).catch(() => undefined);
    const last = [...(history?.messages ?? [])].reverse().find((e) => e.type === "compaction");
    const failed = last?.type === "compaction" && last.failed ? last.failed : result.summaryTokens === 0 ? "no summary came back" : undefined;
    if (failed !== undefined) {
      this.panel.push({ type: "notice", level: "warning", text: compactionFailedNotice(failed, result.droppedTurns) });
    } else {
      this.panel.push({ type: "notice", level: "info", text: compactionNotice(result.summaryTokens, result.droppedTurns) });
    }
    await this.refreshStatus();
  }

  private async undo(): Promise<void> {
    const result = await this.client.command<UndoResult>(Commands.undo);
    const history = await this.client.command<HistoryResult>(Commands.history);
    this.panel.push({ type: "history", messages: history.messages ?? [] });
    this.panel.push({ type: "notice", level: "info", text: undoNotice(result) });
    this.statusBar.clearContext();
    await this.refreshStatus();
  }

  /**
   * Takes back the last undo. As after undo, the panel is redrawn from the server's history, so the turn
   * that came back shows again. Nothing to redo (no undo yet, or something new since) is an answer, not a
   * failure: said in the panel and a toast, in the server's words, without the error's "Show Log".
   */
  private async redo(): Promise<void> {
    let result: UndoResult;
    try {
      result = await this.client.command<UndoResult>(Commands.redo);
    } catch (error) {
      const message = errorMessage(error);
      if (!/^Nothing to redo/i.test(message)) throw error;
      this.panel.push({ type: "notice", level: "info", text: message, key: NOTHING_TO_REDO });
      if (this.openToasts.has(message)) return; // asked again while the toast shows: once is enough
      this.openToasts.add(message);
      void vscode.window.showInformationMessage(`Interpreter: ${message}`).then(() => this.openToasts.delete(message));
      return;
    }
    const history = await this.client.command<HistoryResult>(Commands.history);
    this.panel.push({ type: "history", messages: history.messages ?? [] });
    this.panel.push({ type: "notice", level: "info", text: redoNotice(result) });
    this.statusBar.clearContext();
    await this.refreshStatus();
  }

  private async showVariables(): Promise<void> {
    const { variables } = await this.client.command<{ variables: Variable[] }>(Commands.variables);
    if (!variables.length) {
      await vscode.window.showInformationMessage("The kernel has no variables yet.");
      return;
    }
    await vscode.window.showQuickPick(
      variables.map((v) => ({ label: v.name, description: v.type, detail: v.summary })),
      { title: "Kernel variables", matchOnDescription: true, matchOnDetail: true },
    );
  }

  private async exportNotebook(verify = false): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    if (!folder) {
      await vscode.window.showInformationMessage("Open a folder first: the notebook is written inside the workspace.");
      return;
    }
    const name = await vscode.window.showInputBox({ title: "Export the conversation as a notebook", value: "interpreter-session.ipynb", prompt: "Path inside the workspace" });
    if (!name?.trim()) return;
    const target = path.resolve(folder.uri.fsPath, name.trim());
    if (verify) {
      // The server re-runs the notebook in a fresh kernel: minutes, maybe. Shown as it works; Cancel interrupts.
      const result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: "Verifying the notebook: re-running it in a fresh kernel…", cancellable: true },
        (_progress, token) => {
          token.onCancellationRequested(() => void this.client.command(Commands.interrupt));
          return this.client.command<ExportNotebookResult>(Commands.exportNotebook, { path: target, verify: true });
        },
      );
      const summary = verificationSummary(result);
      const show = summary.reproduces ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
      this.panel.push({ type: "notice", level: summary.reproduces ? "info" : "warning", text: summary.text });
      if ((await show(summary.text, "Open")) === "Open") await vscode.commands.executeCommand("vscode.open", vscode.Uri.file(result.path));
      return;
    }
    const result = await this.client.command<ExportNotebookResult>(Commands.exportNotebook, { path: target });
    const open = await vscode.window.showInformationMessage(`Notebook written: ${result.path}`, "Open");
    if (open) await vscode.commands.executeCommand("vscode.open", vscode.Uri.file(result.path));
  }

  private async statusMenu(): Promise<void> {
    const actions: { label: string; command: string }[] = [
      { label: "$(stop-circle) Interrupt", command: "interpreterLsp.interrupt" },
      { label: "$(refresh) Restart Kernel", command: "interpreterLsp.restartKernel" },
      { label: "$(clear-all) Reset Conversation", command: "interpreterLsp.reset" },
      { label: "$(fold) Compact Conversation", command: "interpreterLsp.compact" },
      { label: "$(symbol-variable) Show Variables", command: "interpreterLsp.showVariables" },
      { label: "$(terminal) Show Panel", command: "interpreterLsp.showPanel" },
      { label: "$(output) Show Server Log", command: "interpreterLsp.showLogs" },
      { label: "$(refresh) Restart Server", command: "interpreterLsp.restartServer" },
    ];
    const pick = await this.statusBar.withoutTooltip(() => vscode.window.showQuickPick(actions, { title: "Interpreter" }));
    if (pick) await vscode.commands.executeCommand(pick.command);
  }

  dispose(): void {
    this.disposables.splice(0).forEach((d) => {
      d.dispose();
    });
  }
}

let extension: Extension | undefined;

export function activate(context: vscode.ExtensionContext): void {
  extension = new Extension(context);
  context.subscriptions.push(extension);
  extension.activate();
}

export function deactivate(): void {
  extension?.dispose();
  extension = undefined;
}
