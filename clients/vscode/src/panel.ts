// The conversation panel: a webview view. The host keeps the conversation state, applies every event to it
// at once, and sends events to the webview in batches (one message per BATCH_MS), so a flood of output
// costs one postMessage and one render per batch, not one per line.

import * as crypto from "node:crypto";
import * as vscode from "vscode";
import { applyEvent, emptyConversation, type ConversationState, type PanelEvent } from "./conversation";
import type { HostToPanel, PanelToHost } from "./panelMessages";
import type { StatusLine } from "./statusBar";

export const VIEW_ID = "interpreterLsp.panel";
const BATCH_MS = 40;

export type PanelMessageHandler = (message: Exclude<PanelToHost, { type: "ready" }>) => void;

export class ConversationPanel implements vscode.WebviewViewProvider, vscode.Disposable {
  readonly state: ConversationState = emptyConversation();
  private view: vscode.WebviewView | undefined;
  private ready = false;
  private queue: PanelEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private kernelLine: StatusLine = { text: "", model: "", tooltip: "", context: "", contextTooltip: "" };
  private readonly changeEmitter = new vscode.EventEmitter<void>();
  /** Fires after the state changed (for context keys and the status bar). */
  readonly onDidChange = this.changeEmitter.event;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly onMessage: PanelMessageHandler,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    this.ready = false;
    view.webview.options = {
      enableScripts: true,
      localResourceRoots: [vscode.Uri.joinPath(this.extensionUri, "dist"), vscode.Uri.joinPath(this.extensionUri, "media")],
    };
    view.webview.html = this.html(view.webview);
    view.webview.onDidReceiveMessage((message: PanelToHost) => {
      if (message.type === "ready") this.sendState();
      else this.onMessage(message);
    });
    view.onDidDispose(() => {
      if (this.view === view) {
        this.view = undefined;
        this.ready = false;
      }
    });
    view.onDidChangeVisibility(() => {
      // A hidden webview is torn down and reloads when shown; its script asks for the state again.
      if (!view.visible) this.ready = false;
    });
  }

  /** Applies an event to the conversation and queues it for the webview. */
  push(event: PanelEvent): void {
    applyEvent(this.state, event);
    this.changeEmitter.fire();
    if (!this.ready) return; // the webview gets the whole state when it says it is ready
    this.queue.push(event);
    this.timer ??= setTimeout(() => this.flush(), BATCH_MS);
  }

  /** The user just acted: the panel's next render scrolls to the end, where the result comes. */
  follow(): void {
    this.post({ type: "follow" });
  }

  setKernelLine(line: StatusLine): void {
    this.kernelLine = line;
    this.post({ type: "kernel", ...this.kernelLine });
  }

  /** Shows the panel; with focusInput the cursor goes to its message box, else focus stays where it was. */
  async reveal(focusInput: boolean): Promise<void> {
    if (this.view && !focusInput) {
      this.view.show(true);
      return;
    }
    await vscode.commands.executeCommand(`${VIEW_ID}.focus`);
    if (focusInput) this.post({ type: "focusInput" });
    else await vscode.commands.executeCommand("workbench.action.focusActiveEditorGroup");
  }

  private flush(): void {
    this.timer = undefined;
    if (!this.queue.length) return;
    const events = this.queue;
    this.queue = [];
    this.post({ type: "events", events });
  }

  private sendState(): void {
    // The state already holds every queued event: drop the queue so nothing is applied twice.
    this.queue = [];
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.ready = true;
    this.post({ type: "state", state: this.state });
    this.post({ type: "kernel", ...this.kernelLine });
  }

  private post(message: HostToPanel): void {
    if (this.view) void this.view.webview.postMessage(message);
  }

  private html(webview: vscode.Webview): string {
    const nonce = crypto.randomBytes(16).toString("base64");
    const script = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "webview.js"));
    const style = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "media", "panel.css"));
    const icons = webview.asWebviewUri(vscode.Uri.joinPath(this.extensionUri, "dist", "codicon.css"));
    const csp = [
      "default-src 'none'",
      `img-src ${webview.cspSource} data:`,
      `style-src ${webview.cspSource}`,
      `font-src ${webview.cspSource}`,
      `script-src 'nonce-${nonce}'`,
    ].join("; ");
    return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${icons.toString()}">
<link rel="stylesheet" href="${style.toString()}">
<title>Interpreter</title>
</head>
<body>
<div id="interpreter-root">
<div id="empty">Ask for something below, or select code and run <b>Interpreter: Run Selection or Cell</b>.</div>
<div id="entries" role="log" aria-live="polite"></div>
</div>
<div id="footer">
<div id="activity-row"><span id="activity" hidden role="status"></span></div>
<div id="status-line"><span id="kernel"></span><span id="model"></span><span id="context"></span></div>
<div id="input-row">
<textarea id="prompt" rows="2" placeholder="Ask the interpreter…" title="Enter sends; Shift+Enter starts a new line" aria-label="Message (Enter sends, Shift+Enter starts a new line)"></textarea>
<button id="send" title="Send (Enter)" aria-label="Send"><span class="codicon codicon-send" aria-hidden="true"></span></button>
<button id="stop" title="Interrupt: stop the model and the running code" aria-label="Stop" hidden><span class="codicon codicon-stop-circle" aria-hidden="true"></span></button>
</div>
</div>
<script nonce="${nonce}" src="${script.toString()}"></script>
</body>
</html>`;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
    this.changeEmitter.dispose();
  }
}
