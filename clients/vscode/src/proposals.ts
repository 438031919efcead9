// What the user does with a proposal besides running it: edit it in an editor (running that editor's text
// approves the edited code), or insert it into a document (shown as a diff first when it replaces code).

import * as vscode from "vscode";

export const PREVIEW_SCHEME = "interpreter-proposal";

/** VS Code language ids for the protocol's language names. */
export function vscodeLanguageId(language: string): string {
  const map: Record<string, string> = { shell: "shellscript", bash: "shellscript", sh: "shellscript", py: "python" };
  return map[language] ?? language;
}

/** A document's text with `[start, end)` (offsets) replaced by `code`. */
export function replaceRange(text: string, start: number, end: number, code: string): string {
  return text.slice(0, start) + code + text.slice(end);
}

/** Documents the user opened with "Edit" on a proposal, and the diff previews of "Insert". */
export class ProposalDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly edits = new Map<string, { proposalId: string; original: string }>();
  private readonly previews = new Map<string, string>();
  private readonly disposables: vscode.Disposable[] = [];
  private lastTextEditor: vscode.TextEditor | undefined;
  /** The "Edit the code…" hint of each proposal being edited: it goes when the edit is over. */
  private readonly hints = new Map<string, () => void>();

  constructor() {
    this.lastTextEditor = vscode.window.activeTextEditor;
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, this),
      vscode.window.onDidChangeActiveTextEditor((editor) => {
        if (editor && editor.document.uri.scheme !== PREVIEW_SCHEME && !this.edits.has(editor.document.uri.toString())) {
          this.lastTextEditor = editor;
        }
        void vscode.commands.executeCommand(
          "setContext",
          "interpreterLsp.editingProposal",
          editor !== undefined && this.edits.has(editor.document.uri.toString()),
        );
      }),
      vscode.workspace.onDidCloseTextDocument((doc) => {
        const edit = this.edits.get(doc.uri.toString());
        if (edit) this.endHint(edit.proposalId);
        this.edits.delete(doc.uri.toString());
        this.previews.delete(doc.uri.toString());
      }),
    );
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.previews.get(uri.toString()) ?? "";
  }

  /** Opens the proposal's code in a new editor of its language. */
  async edit(proposalId: string, code: string, language: string): Promise<void> {
    const existing = [...this.edits.entries()].find(([, v]) => v.proposalId === proposalId);
    if (existing) {
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === existing[0]);
      if (doc) {
        await vscode.window.showTextDocument(doc);
        return;
      }
    }
    const doc = await vscode.workspace.openTextDocument({ language: vscodeLanguageId(language), content: code });
    this.edits.set(doc.uri.toString(), { proposalId, original: code });
    await vscode.window.showTextDocument(doc);
    await vscode.commands.executeCommand("setContext", "interpreterLsp.editingProposal", true);
    this.showHint(proposalId);
  }

  /**
   * The hint how to run the edited code, as a notification that lasts exactly as long as the edit: it goes
   * by itself once the code ran or the proposal was decided (an information message would linger).
   */
  private showHint(proposalId: string): void {
    this.endHint(proposalId);
    void vscode.window.withProgress(
      {
        location: vscode.ProgressLocation.Notification,
        title: "Edit the code, then run it with 'Interpreter: Approve' (the ✓ in the editor title) or the panel's Run button.",
      },
      () => new Promise<void>((resolve) => this.hints.set(proposalId, resolve)),
    );
  }

  private endHint(proposalId: string): void {
    this.hints.get(proposalId)?.();
    this.hints.delete(proposalId);
  }

  /**
   * Closes the editor of a proposal's code once the proposal is decided (ran, rejected, written, expired):
   * reverted first, so closing never asks to save an untitled document nobody needs any more.
   */
  async closeEdit(proposalId: string): Promise<void> {
    this.endHint(proposalId);
    const entry = [...this.edits.entries()].find(([, v]) => v.proposalId === proposalId);
    if (!entry) return;
    const [uri] = entry;
    this.edits.delete(uri);
    const active = vscode.window.activeTextEditor?.document.uri.toString() === uri;
    await vscode.commands.executeCommand("setContext", "interpreterLsp.editingProposal", false);
    const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
    if (!doc || doc.isClosed) return;
    const previous = active ? undefined : vscode.window.activeTextEditor;
    await vscode.window.showTextDocument(doc, { preview: false, preserveFocus: false });
    await vscode.commands.executeCommand("workbench.action.revertAndCloseActiveEditor");
    if (previous && !previous.document.isClosed) {
      await vscode.window.showTextDocument(previous.document, { viewColumn: previous.viewColumn, preserveFocus: false });
    }
  }

  /** The proposal edited in this document, with its current text. */
  editedIn(document: vscode.TextDocument | undefined): { proposalId: string; code: string } | undefined {
    if (!document) return undefined;
    const edit = this.edits.get(document.uri.toString());
    return edit ? { proposalId: edit.proposalId, code: document.getText() } : undefined;
  }

  /** The edited code of a proposal, when the user changed it in an editor. */
  editedCode(proposalId: string): string | undefined {
    for (const [uri, edit] of this.edits) {
      if (edit.proposalId !== proposalId) continue;
      const doc = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri);
      if (doc && doc.getText() !== edit.original) return doc.getText();
    }
    return undefined;
  }

  /** The editor an insert goes into: the last text editor the user worked in. */
  targetEditor(): vscode.TextEditor | undefined {
    const editor = this.lastTextEditor;
    if (editor && vscode.window.visibleTextEditors.includes(editor) && !editor.document.isClosed) return editor;
    return vscode.window.visibleTextEditors.find(
      (e) => e.document.uri.scheme !== PREVIEW_SCHEME && !this.edits.has(e.document.uri.toString()),
    );
  }

  /**
   * When the insert replaces a selection, shows the change as a diff and asks; true means go ahead.
   * An insert at the cursor replaces nothing and needs no confirmation.
   */
  async confirmReplace(editor: vscode.TextEditor, code: string): Promise<boolean> {
    const selection = editor.selection;
    if (selection.isEmpty) return true;
    const doc = editor.document;
    const proposed = replaceRange(doc.getText(), doc.offsetAt(selection.start), doc.offsetAt(selection.end), code);
    const name = doc.uri.path.split("/").pop() ?? "document";
    const previewUri = vscode.Uri.from({ scheme: PREVIEW_SCHEME, path: `/${name}`, query: String(Date.now()) });
    this.previews.set(previewUri.toString(), proposed);
    await vscode.commands.executeCommand("vscode.diff", doc.uri, previewUri, `${name} ↔ proposed code`, { preview: true });
    const answer = await vscode.window.showInformationMessage(
      `Replace the selected lines ${selection.start.line + 1}–${selection.end.line + 1} of ${name} with the proposed code?`,
      { modal: true },
      "Replace",
    );
    await this.closePreview(previewUri);
    this.previews.delete(previewUri.toString());
    await vscode.window.showTextDocument(doc, editor.viewColumn);
    return answer === "Replace";
  }

  /** Closes the diff tab of a preview: once answered it would only show stale text. */
  private async closePreview(previewUri: vscode.Uri): Promise<void> {
    const target = previewUri.toString();
    const tabs = vscode.window.tabGroups.all
      .flatMap((group) => group.tabs)
      .filter((tab) => tab.input instanceof vscode.TabInputTextDiff && tab.input.modified.toString() === target);
    if (tabs.length) await vscode.window.tabGroups.close(tabs);
  }

  dispose(): void {
    this.disposables.forEach((d) => {
      d.dispose();
    });
  }
}
