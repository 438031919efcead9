// Turns conversation entries into HTML for the panel. Pure: the HTML sanitiser is passed in (DOMPurify
// bound to the webview's window, or to jsdom's in tests), so this runs the same in Node and in the webview.

import MarkdownIt from "markdown-it";
import { AnsiUp } from "ansi_up";
import { uriName } from "../conversation";
import type {
  AssistantEntry,
  ConversationState,
  Entry,
  NoticeEntry,
  OutputItem,
  ProposalEntry,
  RunEntry,
  UserEntry,
} from "../conversation";
import type { FileChange, MimeBundle } from "../protocol";
import { markHidden } from "./hidden";

export type Sanitize = (html: string) => string;

export interface Renderer {
  entry(entry: Entry, state: ConversationState): string;
  markdown(text: string, foldedCode?: ReadonlySet<string>): string;
}

const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"] as const;
/** MIME types the panel can show, best first (what Jupyter front ends prefer, minus scripts). */
export const MIME_ORDER = [
  "text/html",
  "image/svg+xml",
  ...IMAGE_TYPES,
  "text/markdown",
  "text/latex",
  "application/json",
  "text/plain",
] as const;

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, "&amp;")
    .replace(/</g, "&lt;")
    .replace(/>/g, "&gt;")
    .replace(/"/g, "&quot;")
    .replace(/'/g, "&#39;");
}

/** Jupyter sends some MIME values as lists of lines. */
function mimeText(value: unknown): string {
  if (typeof value === "string") return value;
  if (Array.isArray(value) && value.every((v) => typeof v === "string")) return value.join("");
  return JSON.stringify(value, null, 2);
}

function base64OfText(text: string): string {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary);
}

const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** The MIME type of a bundle the panel will show, or undefined when it can show none of them. */
export function pickMime(bundle: MimeBundle): string | undefined {
  return MIME_ORDER.find((mime) => bundle[mime] !== undefined && bundle[mime] !== null);
}

function capitalise(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** A notice as a sentence: a capital first, a full stop last ("input cancelled" → "Input cancelled."). */
export function sentence(text: string): string {
  const trimmed = text.trim();
  if (!trimmed) return trimmed;
  return capitalise(/[.!?:)`"…]$/.test(trimmed) ? trimmed : `${trimmed}.`);
}

export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const minutes = Math.floor(ms / 60_000);
  return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}

const RUN_STATE_LABEL: Record<RunEntry["state"], string> = {
  queued: "queued",
  running: "running…",
  ok: "done",
  error: "error",
  interrupted: "interrupted",
  died: "kernel died",
  timeout: "timed out",
};

/**
 * The code of a tool call the model printed as JSON text (`{"name": "run_code", "arguments": {"language",
 * "code"}}`, bare or in a json fence), which the server turns into a proposal; undefined for anything else.
 */
export function jsonToolCallCode(text: string): string | undefined {
  const trimmed = text.trim().replace(/^```(?:json)?\s*\n([\s\S]*?)\n?```$/, "$1").trim();
  if (!trimmed.startsWith("{")) return undefined;
  try {
    const call = JSON.parse(trimmed) as { name?: unknown; arguments?: unknown };
    const args = typeof call.arguments === "string" ? (JSON.parse(call.arguments) as unknown) : call.arguments;
    const code = args && typeof args === "object" ? (args as { code?: unknown }).code : undefined;
    return call.name === "run_code" && typeof code === "string" ? code : undefined;
  } catch {
    return undefined;
  }
}

/** Normalised code, to recognise a fenced block that became a proposal. */
function codeKey(code: string): string {
  return code.replace(/\s+$/g, "").replace(/^\s*\n/, "");
}

/**
 * Code as a card shows it: one element per line, never soft-wrapped (the stylesheet scrolls it sideways;
 * the panel's script marks a block whose lines run past the edge). A block of more than one line is
 * numbered: the numbers are CSS counters, so copying the code copies the code alone. A shell pipe such as
 * `curl … | sh` therefore always reads as the one line it is. Lines end at line feeds, as Python's do; a
 * carriage return before one is a Windows line end and goes with it, and every character that does not
 * show or that would reorder the line (a lone carriage return among them: Python ends a line there) is
 * drawn as a `<U+XXXX>` marker instead (./hidden.ts), so what the person reads is what runs.
 */
export function codeHtml(code: string): string {
  const lines = code.replace(/\r?\n$/, "").split(/\r?\n/);
  const numbered = lines.length > 1 ? " numbered" : "";
  const body = lines.map((line) => `<span class="line">${markHidden(line, escapeHtml)}</span>`).join("\n");
  return `<pre class="code${numbered}" data-lines="${lines.length}"><code>${body}</code></pre>`;
}

const FILE_CHANGE_MARK: Record<FileChange["change"], string> = { created: "+", modified: "~", deleted: "−" };

/**
 * The files a run touched: each a link that asks the extension host to open it; a deleted file is struck
 * through and not a link (there is nothing to open).
 */
export function filesHtml(files: readonly FileChange[]): string {
  const items = files.map(({ path, change }) => {
    const name = escapeHtml(path);
    const label = change === "deleted"
      ? `<del class="file-path">${name}</del>`
      : `<a href="#" class="file-path" data-action="openFile" data-path="${name}" title="Open ${name}">${name}</a>`;
    return `<li class="file change-${change}" data-change="${change}"><span class="change-mark" aria-hidden="true">${FILE_CHANGE_MARK[change]}</span> ${label} <span class="change-label">${change}</span></li>`;
  });
  const count = files.length === 1 ? "1 file" : `${files.length} files`;
  return `<div class="run-files"><div class="run-files-title">${count} touched</div><ul>${items.join("")}</ul></div>`;
}

export function createRenderer(sanitize: Sanitize): Renderer {
  // The model's text is Markdown without raw HTML: html stays off, and the result is sanitised anyway.
  // Code in it (fenced, indented, inline) shows hidden characters as markers, as a card does: the model's
  // example is read as code too. markdown-it's own escaping keeps every other block as it was.
  const md = new MarkdownIt({ html: false, linkify: true, breaks: false });
  const mdEscape = md.utils.escapeHtml;
  md.set({ highlight: (code) => markHidden(code, mdEscape) });
  md.renderer.rules.code_inline = (tokens, idx, _options, _env, self) =>
    `<code${self.renderAttrs(tokens[idx])}>${markHidden(tokens[idx].content, mdEscape)}</code>`;
  md.renderer.rules.code_block = (tokens, idx, _options, _env, self) =>
    `<pre${self.renderAttrs(tokens[idx])}><code>${markHidden(tokens[idx].content, mdEscape)}</code></pre>\n`;
  const ansi = new AnsiUp();
  // Classes, not inline styles: the panel's CSP allows no style attributes.
  ansi.use_classes = true;
  ansi.boldStyle = "";
  ansi.faintStyle = "";
  ansi.italicStyle = "";
  ansi.underlineStyle = "";

  let folded: ReadonlySet<string> = new Set();
  const defaultFence = md.renderer.rules.fence;
  md.renderer.rules.fence = (tokens, idx, options, env, self) => {
    const token = tokens[idx];
    const called = jsonToolCallCode(token.content);
    if (folded.has(codeKey(token.content)) || (called !== undefined && folded.has(codeKey(called)))) {
      const lang = escapeHtml(token.info.trim().split(/\s+/)[0] ?? "");
      return `<div class="folded-code">${lang || "code"} block: see the proposal below</div>`;
    }
    return defaultFence ? defaultFence(tokens, idx, options, env, self) : self.renderToken(tokens, idx, options);
  };

  function markdown(text: string, foldedCode: ReadonlySet<string> = new Set()): string {
    folded = new Set([...foldedCode].map(codeKey));
    try {
      return sanitize(md.render(text));
    } finally {
      folded = new Set();
    }
  }

  function ansiHtml(text: string): string {
    return ansi.ansi_to_html(text);
  }

  function mimeHtml(bundle: MimeBundle): string {
    const mime = pickMime(bundle);
    if (mime === undefined) {
      const types = Object.keys(bundle).map(escapeHtml).join(", ");
      return `<div class="output-note">Output of a type the panel cannot show (${types}).</div>`;
    }
    const value = bundle[mime];
    if ((IMAGE_TYPES as readonly string[]).includes(mime)) {
      const data = mimeText(value).replace(/\s+/g, "");
      if (!BASE64.test(data)) return `<div class="output-note">An image that is not valid base64.</div>`;
      return `<img class="output-image" alt="${escapeHtml(mime)} output" src="data:${mime};base64,${data}">`;
    }
    switch (mime) {
      case "text/html":
        return `<div class="output-html">${sanitize(mimeText(value))}</div>`;
      case "image/svg+xml":
        // As an <img>, an SVG cannot run scripts or reach the page.
        return `<img class="output-image" alt="SVG output" src="data:image/svg+xml;base64,${base64OfText(mimeText(value))}">`;
      case "text/markdown":
        return `<div class="output-markdown">${markdown(mimeText(value))}</div>`;
      case "application/json":
        return `<pre class="output-json">${escapeHtml(mimeText(value))}</pre>`;
      default:
        return `<pre class="output-text">${ansiHtml(mimeText(value))}</pre>`;
    }
  }

  function outputHtml(item: OutputItem): string {
    switch (item.kind) {
      case "stdout":
        return `<pre class="stdout">${ansiHtml(item.text ?? "")}</pre>`;
      case "stderr":
        return `<pre class="stderr">${ansiHtml(item.text ?? "")}</pre>`;
      case "error": {
        const title = item.ename ? `${item.ename}${item.evalue ? `: ${item.evalue}` : ""}` : "Error";
        const trace = item.text ? `<pre class="traceback">${ansiHtml(item.text)}</pre>` : "";
        return `<div class="output-error"><div class="error-title">${escapeHtml(title)}</div>${trace}</div>`;
      }
      case "result":
      case "display":
        if (item.data) return `<div class="output-rich">${mimeHtml(item.data)}</div>`;
        return `<pre class="output-text">${ansiHtml(item.text ?? "")}</pre>`;
    }
  }

  function user(entry: UserEntry): string {
    const context = entry.context ? `<div class="context">${escapeHtml(entry.context)}</div>` : "";
    return `<div class="entry user" data-id="${escapeHtml(entry.id)}"><div class="role">You</div>${context}<div class="markdown">${markdown(entry.text)}</div></div>`;
  }

  function assistant(entry: AssistantEntry, state: ConversationState): string {
    const codes = new Set(
      state.entries
        .filter((e): e is ProposalEntry => e.kind === "proposal" && e.proposal.turnId === entry.turnId)
        .map((e) => e.proposal.code),
    );
    const cursor = entry.done ? "" : `<span class="cursor" aria-hidden="true"></span>`;
    // A reply that is only a tool call printed as JSON became a proposal: its card shows it, not raw JSON.
    const called = entry.done ? jsonToolCallCode(entry.text) : undefined;
    if (called !== undefined && [...codes].some((c) => codeKey(c) === codeKey(called))) {
      return `<div class="entry assistant" data-id="${escapeHtml(entry.id)}"><div class="role">Assistant</div><div class="folded-code">A tool call: see the proposal below</div></div>`;
    }
    const partial = entry.partial ? `<div class="output-note">The answer was cut short.</div>` : "";
    return `<div class="entry assistant${entry.done ? "" : " streaming"}" data-id="${escapeHtml(entry.id)}"><div class="role">Assistant</div><div class="markdown">${markdown(entry.text, codes)}</div>${cursor}${partial}</div>`;
  }

  function proposal(entry: ProposalEntry): string {
    const p = entry.proposal;
    const id = escapeHtml(p.proposalId);
    const reasons = p.risk.reasons.length
      ? `<ul class="risk-reasons">${p.risk.reasons.map((r) => `<li>${escapeHtml(r)}</li>`).join("")}</ul>`
      : "";
    const button = (action: string, icon: string, label: string, title: string, extra = ""): string =>
      `<button class="action ${action}${extra}" data-action="${action}" data-proposal-id="${id}" title="${escapeHtml(title)}"><span class="codicon codicon-${icon}" aria-hidden="true"></span>${label}</button>`;
    // Inserting writes the code into a document instead of running it: that decides the proposal.
    const open = entry.status === "pending";
    // On a high-risk card Run is not the inviting default: it looks like the other choices, marked.
    const runExtra = p.risk.level === "high" ? " caution" : "";
    const runTitle = p.risk.level === "high" ? "High risk: read the code and the reasons above before running it" : "Run this code in the kernel";
    const actions = open
      ? `<div class="actions">${button("approve", "play", "Run", runTitle, runExtra)}${button("edit", "edit", "Edit", "Open the code in an editor; run it from there")}${button("reject", "close", "Reject", "Tell the model you declined")}${button("insert", "insert", "Insert", "Write the code into the document instead of running it")}</div>`
      : "";
    const statusText: Record<ProposalEntry["status"], string> = {
      pending: p.autoRun ? "Runs automatically" : "Waiting for your approval",
      running: "Running",
      ran: "Ran",
      rejected: "Rejected",
      applied: entry.appliedTo ? `Written into ${uriName(entry.appliedTo)}` : "Written into the document",
      expired: "Not run",
    };
    const notes = [entry.edited ? "edited" : ""].filter(Boolean);
    const status = `${statusText[entry.status]}${notes.length ? ` (${notes.join(", ")})` : ""}`;
    const waitReason =
      open && !p.autoRun && p.waitReason ? `<div class="wait-reason">${escapeHtml(capitalise(p.waitReason))}</div>` : "";
    return `<div class="entry proposal status-${entry.status} risk-level-${escapeHtml(p.risk.level)}" data-id="${escapeHtml(entry.id)}" data-proposal-id="${id}">
<div class="proposal-head">${p.agent ? `<span class="agent">from ${escapeHtml(p.agent)}${p.created ? ` at ${escapeHtml(new Date(p.created).toLocaleTimeString())}` : ""}</span>` : ""}<span class="language">${escapeHtml(p.language)}</span><span class="risk risk-${escapeHtml(p.risk.level)}">risk: ${escapeHtml(p.risk.level)}</span><span class="proposal-status">${status}</span></div>
${reasons}${codeHtml(p.code)}<div class="code-overflow" hidden>Lines run past the edge: scroll sideways to read them whole.</div>${waitReason}${actions}</div>`;
  }

  function run(entry: RunEntry, state: ConversationState): string {
    const parts: string[] = [];
    const label = RUN_STATE_LABEL[entry.state];
    const duration = entry.durationMs !== undefined ? ` · <span class="run-duration">${formatDuration(entry.durationMs)}</span>` : "";
    const language = entry.language ? `${escapeHtml(entry.language)} · ` : "";
    parts.push(
      `<div class="run-head"><span class="run-title">Run</span> <span class="run-meta">${language}<span class="run-state state-${entry.state}">${label}</span>${duration}</span></div>`,
    );
    if (entry.location) parts.push(`<div class="run-location">${escapeHtml(entry.location)}</div>`);
    // The code of a proposal's run is on the proposal's card, unless the user edited it before running.
    const proposal = entry.proposalId === undefined ? undefined : state.entries.find((e) => e.id === `proposal:${entry.proposalId}`);
    const shownOnCard = proposal?.kind === "proposal" && proposal.proposal.code === entry.code;
    if (entry.code !== undefined && !shownOnCard) {
      const summary = entry.proposalId === undefined ? "Code" : "Code as run (edited)";
      parts.push(`<details class="run-code"><summary>${summary}</summary>${codeHtml(entry.code)}</details>`);
    }
    parts.push(`<div class="outputs">${entry.outputs.map(outputHtml).join("")}</div>`);
    if (entry.droppedChars > 0) {
      parts.push(`<div class="output-note">${entry.droppedChars.toLocaleString("en")} more characters of output not shown.</div>`);
    }
    if (entry.lostMessages > 0) {
      parts.push(`<div class="output-note">${entry.lostMessages} output messages did not arrive.</div>`);
    }
    if (entry.message) parts.push(`<div class="run-message">${escapeHtml(entry.message)}</div>`);
    if (entry.files?.length) parts.push(filesHtml(entry.files));
    return `<div class="entry run state-${entry.state}" data-id="${escapeHtml(entry.id)}" data-run-id="${escapeHtml(entry.runId)}">${parts.join("")}</div>`;
  }

  function notice(entry: NoticeEntry): string {
    // The server's sentences may carry a list or `code`: Markdown without raw HTML, sanitised.
    return `<div class="entry notice level-${entry.level}" data-id="${escapeHtml(entry.id)}"><div class="markdown">${markdown(sentence(entry.text))}</div></div>`;
  }

  function entryHtml(entry: Entry, state: ConversationState): string {
    switch (entry.kind) {
      case "user":
        return user(entry);
      case "assistant":
        return assistant(entry, state);
      case "proposal":
        return proposal(entry);
      case "run":
        return run(entry, state);
      case "notice":
        return notice(entry);
    }
  }

  return { entry: entryHtml, markdown };
}
