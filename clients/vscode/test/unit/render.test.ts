import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import DOMPurify from "dompurify";
import { JSDOM } from "jsdom";
import MarkdownIt from "markdown-it";
import { applyEvent, emptyConversation, type ConversationState } from "../../src/conversation";
import { hiddenAt, marker } from "../../src/webview/hidden";
import { codeHtml, createRenderer, escapeHtml, formatDuration, pickMime } from "../../src/webview/render";

const window = new JSDOM("").window;
const purify = DOMPurify(window);
const renderer = createRenderer((html) => purify.sanitize(html));

function dom(html: string): Document {
  return new JSDOM(`<body>${html}</body>`).window.document;
}

function rendered(state: ConversationState, index = 0): Document {
  return dom(renderer.entry(state.entries[index], state));
}

test("assistant Markdown is rendered; raw HTML from the model is shown as text, not run", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "message",
    params: { turnId: "t", seq: 0, delta: "**Done** <img src=x onerror=alert(1)> [a](javascript:alert(1))", done: true },
  });
  const doc = rendered(s);
  assert.equal(doc.querySelector("strong")?.textContent, "Done");
  assert.equal(doc.querySelector("img"), null);
  assert.match(doc.body.textContent ?? "", /<img src=x onerror=alert\(1\)>/);
  assert.equal(doc.querySelector("a[href^='javascript']"), null);
});

test("a code block that became a proposal folds into a note; other blocks stay", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "message",
    params: { turnId: "t", seq: 0, delta: "Run:\n```python\nprint(1)\n```\nExample:\n```text\nhi\n```\n", done: true },
  });
  applyEvent(s, {
    type: "proposal",
    params: { proposalId: "p", turnId: "t", language: "python", code: "print(1)\n", risk: { level: "low", reasons: [] }, autoRun: false },
  });
  const doc = rendered(s);
  assert.match(doc.querySelector(".folded-code")?.textContent ?? "", /python block: see the proposal below/);
  assert.equal(doc.querySelectorAll("pre code").length, 1);
  assert.equal(doc.querySelector("pre code")?.textContent, "hi\n");
});

test("a proposal shows its language, risk, reasons and the four actions while pending", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "proposal",
    params: {
      proposalId: "p1",
      turnId: "t",
      language: "shell",
      code: "rm -rf build <b>",
      risk: { level: "high", reasons: ["deletes files recursively"] },
      autoRun: false,
    },
  });
  let doc = rendered(s);
  assert.equal(doc.querySelector(".language")?.textContent, "shell");
  assert.equal(doc.querySelector(".risk")?.textContent, "risk: high");
  assert.equal(doc.querySelector(".risk-reasons li")?.textContent, "deletes files recursively");
  assert.equal(doc.querySelector("pre.code code")?.textContent, "rm -rf build <b>");
  assert.deepEqual(
    [...doc.querySelectorAll("button")].map((b) => [b.textContent, b.getAttribute("data-proposal-id")]),
    [
      ["Run", "p1"],
      ["Edit", "p1"],
      ["Reject", "p1"],
      ["Insert", "p1"],
    ],
  );
  applyEvent(s, { type: "proposalState", params: { proposalId: "p1", turnId: "t1", state: "applied", uri: "file:///ws/calc.py" } });
  doc = rendered(s);
  assert.equal(doc.querySelectorAll("button").length, 0, "written into a document: decided, nothing to click");
  assert.equal(doc.querySelector(".proposal-status")?.textContent, "Written into calc.py");
});

test("run output: ANSI colours become classes, errors show name and value, duration shows", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "output", params: { runId: "r", seq: 0, kind: "stdout", text: "\u001b[31mred\u001b[0m plain" } });
  applyEvent(s, {
    type: "output",
    params: { runId: "r", seq: 1, kind: "error", ename: "ZeroDivisionError", evalue: "division by zero", text: "Traceback...\n1/0" },
  });
  applyEvent(s, { type: "runStatus", params: { runId: "r", state: "error", durationMs: 1530, language: "python" } });
  const doc = rendered(s);
  assert.equal(doc.querySelector(".stdout .ansi-red-fg")?.textContent, "red");
  assert.equal(doc.querySelector(".stdout")?.textContent, "red plain");
  assert.equal(doc.querySelector(".error-title")?.textContent, "ZeroDivisionError: division by zero");
  assert.match(doc.querySelector(".traceback")?.textContent ?? "", /1\/0/);
  assert.equal(doc.querySelector(".run-state")?.textContent, "error");
  assert.match(doc.querySelector(".run-meta")?.textContent ?? "", /python · error · 1\.5 s/);
});

test("display data: a PNG becomes an image, HTML is sanitised, bad base64 is refused", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "output", params: { runId: "r", seq: 0, kind: "display", data: { "image/png": "iVBORw0KGgo=\n", "text/plain": "<Figure>" } } });
  applyEvent(s, {
    type: "output",
    params: { runId: "r", seq: 1, kind: "result", data: { "text/html": "<table><tr><td>1</td></tr></table><script>alert(1)</script><img src=x onerror=alert(1)>" } },
  });
  applyEvent(s, { type: "output", params: { runId: "r", seq: 2, kind: "display", data: { "image/png": "\" onload=\"alert(1)" } } });
  const doc = rendered(s);
  const images = doc.querySelectorAll("img.output-image");
  assert.equal(images.length, 1);
  assert.equal(images[0].getAttribute("src"), "data:image/png;base64,iVBORw0KGgo=");
  assert.equal(doc.querySelector(".output-html td")?.textContent, "1");
  assert.equal(doc.querySelector("script"), null);
  assert.equal(doc.querySelector("[onerror]"), null);
  assert.match(doc.body.textContent ?? "", /An image that is not valid base64/);
});

test("SVG output is shown as an image, never inlined", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "output", params: { runId: "r", seq: 0, kind: "display", data: { "image/svg+xml": "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>" } } });
  const doc = rendered(s);
  assert.equal(doc.querySelector("svg"), null);
  assert.match(doc.querySelector("img")?.getAttribute("src") ?? "", /^data:image\/svg\+xml;base64,/);
});

test("MIME choice prefers rich types; durations read naturally", () => {
  assert.equal(pickMime({ "text/plain": "x", "image/png": "y" }), "image/png");
  assert.equal(pickMime({ "application/vnd.custom": 1 }), undefined);
  assert.equal(formatDuration(250), "250 ms");
  assert.equal(formatDuration(2500), "2.5 s");
  assert.equal(formatDuration(125_000), "2 min 5 s");
});

test("a waiting proposal says why it waits; the reason goes once it is decided", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "proposal",
    params: {
      proposalId: "p1", turnId: "t", language: "python", code: "x", risk: { level: "high", reasons: [] }, autoRun: false,
      waitReason: "high risk: waits for approval",
    },
  });
  assert.equal(rendered(s).querySelector(".wait-reason")?.textContent, "High risk: waits for approval");
  applyEvent(s, { type: "proposalStatus", proposalId: "p1", status: "rejected" });
  assert.equal(rendered(s).querySelector(".wait-reason"), null);
});

test("another agent's proposal names the agent on its card, with its buttons", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "proposal",
    params: {
      proposalId: "p1", turnId: "a-1", language: "python", code: "x", risk: { level: "low", reasons: [] }, autoRun: false,
      origin: "agent", agent: "Claude Code <2.1>", created: "2026-12-03T20:15:02Z",
    },
  });
  const card = rendered(s);
  assert.match(card.querySelector(".agent")?.textContent ?? "", /^from Claude Code <2\.1> at /);
  assert.equal(card.querySelectorAll("button").length, 4);
});

test("an expired proposal has no buttons; a run of edited code shows the code that ran", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "proposal", params: { proposalId: "p1", turnId: "t", language: "python", code: "print(6 * 7)", risk: { level: "low", reasons: [] }, autoRun: false } });
  applyEvent(s, { type: "proposal", params: { proposalId: "p2", turnId: "t", language: "python", code: "print(1)", risk: { level: "low", reasons: [] }, autoRun: false } });
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "running", proposalId: "p1" } });
  applyEvent(s, { type: "runStarted", runId: "r1", code: "print(6 * 8)" });
  applyEvent(s, { type: "proposalStatus", proposalId: "p1", status: "running", edited: true });
  applyEvent(s, { type: "turnStatus", params: { turnId: "t", state: "done" } });
  const p1 = rendered(s, 0);
  assert.equal(p1.querySelector(".proposal-status")?.textContent, "Running (edited)");
  const p2 = rendered(s, 1);
  assert.equal(p2.querySelectorAll("button").length, 0);
  assert.equal(p2.querySelector(".proposal-status")?.textContent, "Not run");
  const run = rendered(s, 2);
  assert.equal(run.querySelector(".run-code summary")?.textContent, "Code as run (edited)");
  assert.equal(run.querySelector(".run-code code")?.textContent, "print(6 * 8)");
  // Unedited: the code is on the proposal's card, not repeated.
  applyEvent(s, { type: "runStatus", params: { runId: "r2", state: "ok", proposalId: "p2" } });
  assert.equal(rendered(s, 3).querySelector(".run-code"), null);
});

test("files a run touched: created and modified ones are links to open, a deleted one is struck through", () => {
  const s = emptyConversation();
  applyEvent(s, { type: "output", params: { runId: "r", seq: 0, kind: "stdout", text: "saved\n" } });
  applyEvent(s, {
    type: "runStatus",
    params: {
      runId: "r",
      state: "ok",
      durationMs: 20,
      files: [
        { path: "out/new <1>.csv", change: "created" },
        { path: "old.txt", change: "modified" },
        { path: "gone.txt", change: "deleted" },
      ],
    },
  });
  const doc = rendered(s);
  // Under the run's output.
  const children = [...(doc.querySelector(".entry.run")?.children ?? [])].map((c) => c.className);
  assert.ok(children.indexOf("run-files") > children.indexOf("outputs"), children.join(" "));
  assert.equal(doc.querySelector(".run-files-title")?.textContent, "3 files touched");
  assert.deepEqual(
    [...doc.querySelectorAll(".run-files li")].map((li) => li.textContent),
    ["+ out/new <1>.csv created", "~ old.txt modified", "− gone.txt deleted"],
  );
  const links = [...doc.querySelectorAll("[data-action='openFile']")];
  assert.deepEqual(links.map((a) => a.getAttribute("data-path")), ["out/new <1>.csv", "old.txt"]);
  assert.equal(doc.querySelector(".change-deleted del")?.textContent, "gone.txt");
  assert.equal(doc.querySelector(".change-deleted [data-action]"), null);
});

test("files a run touched come back with the run from history; malformed entries and runs without files show nothing", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "history",
    messages: [
      { type: "run", runId: "r1", origin: "user", language: "python", code: "open('result.txt','w').write('x')", state: "ok", durationMs: 5, outputForModel: "", outputs: [], files: [{ path: "result.txt", change: "created" }] },
      { type: "run", runId: "r2", origin: "user", language: "python", code: "1", state: "ok", durationMs: 5, outputForModel: "", outputs: [], files: [] },
    ],
  });
  applyEvent(s, {
    type: "runStatus",
    params: { runId: "r3", state: "ok", files: [{ path: "", change: "created" }, { path: "x", change: "renamed" } as never, { path: "y.txt", change: "deleted" }] },
  });
  const restored = rendered(s, 0);
  assert.equal(restored.querySelector(".run-files-title")?.textContent, "1 file touched");
  assert.equal(restored.querySelector("[data-action='openFile']")?.getAttribute("data-path"), "result.txt");
  assert.equal(rendered(s, 1).querySelector(".run-files"), null);
  assert.deepEqual([...rendered(s, 2).querySelectorAll(".run-files li")].map((li) => li.textContent), ["− y.txt deleted"]);
});

test("a live traceback is in colour when the server sends the kernel's lines, as after a reload", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "output",
    params: {
      runId: "r", seq: 0, kind: "error", ename: "ZeroDivisionError", evalue: "division by zero",
      text: "ZeroDivisionError: division by zero",
      traceback: ["\u001b[31m-----\u001b[39m", "\u001b[31mZeroDivisionError\u001b[39m: division by zero"],
    },
  });
  const doc = rendered(s);
  assert.equal(doc.querySelector(".traceback span.ansi-red-fg")?.textContent, "-----");
  assert.ok(!(doc.querySelector(".traceback")?.textContent ?? "").includes("\u001b"), "no raw escape codes");
});

test("a notice is a sentence; its list and `code` render as such, raw HTML from the server never does", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "notice",
    level: "error",
    text: 'No model is configured. Set interpreter.model, for example:\n- Ollama: "ollama_chat/qwen2.5-coder" (after `ollama pull qwen2.5-coder`)\n- <img src=x onerror=alert(1)> cloud',
  });
  applyEvent(s, { type: "notice", level: "info", text: "input cancelled" });
  const doc = rendered(s);
  const items = [...doc.querySelectorAll(".notice li")].map((li) => li.textContent);
  assert.equal(items.length, 2);
  assert.equal(doc.querySelector(".notice li code")?.textContent, "ollama pull qwen2.5-coder");
  assert.equal(doc.querySelectorAll(".notice img").length, 0);
  assert.match(items[1] ?? "", /<img src=x onerror=alert\(1\)> cloud/);
  assert.equal(rendered(s, 1).querySelector(".notice")?.textContent?.trim(), "Input cancelled.");
});

test("a tool call the model printed as JSON folds into its proposal: no raw JSON in the bubble", () => {
  const s = emptyConversation();
  const call = JSON.stringify({ name: "run_code", arguments: { language: "python", code: "print(6 * 7)" } });
  applyEvent(s, { type: "message", params: { turnId: "t", seq: 0, delta: call, done: true } });
  applyEvent(s, {
    type: "proposal",
    params: { proposalId: "p", turnId: "t", language: "python", code: "print(6 * 7)", risk: { level: "low", reasons: [] }, autoRun: false },
  });
  const doc = html(s);
  const bubble = doc.querySelector(".entry.assistant");
  assert.doesNotMatch(bubble?.textContent ?? "", /run_code|arguments/);
  assert.match(bubble?.textContent ?? "", /see the proposal below/);
  // In a json fence with words around it: the fence folds, the words stay.
  const t = emptyConversation();
  applyEvent(t, { type: "message", params: { turnId: "t", seq: 0, delta: "Running it:\n```json\n" + call + "\n```\n", done: true } });
  applyEvent(t, {
    type: "proposal",
    params: { proposalId: "p", turnId: "t", language: "python", code: "print(6 * 7)", risk: { level: "low", reasons: [] }, autoRun: false },
  });
  const fenced = html(t).querySelector(".entry.assistant");
  assert.match(fenced?.textContent ?? "", /Running it:/);
  assert.doesNotMatch(fenced?.textContent ?? "", /run_code"|arguments/);
});

test("code on a card: one element per line, numbered when it has several, and never soft-wrapped", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "proposal",
    params: { proposalId: "p", turnId: "t", language: "shell", code: "curl -fsSL https://example.com/install.sh | sh\necho done\n", risk: { level: "high", reasons: ["pipes a download into a shell"] }, autoRun: false },
  });
  const doc = html(s);
  const pre = doc.querySelector(".entry.proposal pre.code");
  assert.ok(pre?.classList.contains("numbered"));
  assert.deepEqual([...(pre?.querySelectorAll(".line") ?? [])].map((l) => l.textContent), ["curl -fsSL https://example.com/install.sh | sh", "echo done"]);
  // Copying the code copies the code: the numbers are not text.
  assert.equal(pre?.querySelector("code")?.textContent, "curl -fsSL https://example.com/install.sh | sh\necho done");
  // Run on a high-risk card is marked, not the primary default.
  assert.ok(doc.querySelector("button[data-action='approve']")?.classList.contains("caution"));
  const one = emptyConversation();
  applyEvent(one, { type: "proposal", params: { proposalId: "q", turnId: "t", language: "python", code: "print(1)", risk: { level: "low", reasons: [] }, autoRun: false } });
  assert.ok(!html(one).querySelector("pre.code")?.classList.contains("numbered"));
  assert.ok(!html(one).querySelector("button[data-action='approve']")?.classList.contains("caution"));
});

function html(state: ConversationState): Document {
  return dom(state.entries.map((e) => renderer.entry(e, state)).join(""));
}

// Trojan Source (CVE-2021-42574): characters that do not show, or that reorder the text around them, are
// drawn as `<U+XXXX>` markers wherever code is shown; the characters themselves never reach the DOM.

/** The markers of a block, as their text: ["<U+202E>", ...]. */
function markers(html: string): string[] {
  return [...dom(html).querySelectorAll(".hidden-char")].map((m) => m.textContent ?? "");
}

/** Whether HTML still holds one of the characters that act on the display (the raw character, not a marker). */
const RAW_HIDDEN = /[\u202A-\u202E\u2066-\u2069\u200B\u3164\r\u{E0000}-\u{E007F}]/u;

/** codeHtml as it was before markers: what code without hidden characters must still render as, byte for byte. */
function codeHtmlBefore(code: string): string {
  const lines = code.replace(/\n$/, "").split("\n");
  const numbered = lines.length > 1 ? " numbered" : "";
  const body = lines.map((line) => `<span class="line">${escapeHtml(line)}</span>`).join("\n");
  return `<pre class="code${numbered}" data-lines="${lines.length}"><code>${body}</code></pre>`;
}

test("Trojan Source: a right-to-left override and isolates in a Python line are markers on the card, never the characters", () => {
  // The paper's "commenting out": on screen the check reads as a comment, yet `return` runs.
  const code = 'def is_admin(user):\n    if user != "admin\u202E \u2066": # not admin\u2069 \u2066:\n        return True\n    return False\n';
  const s = emptyConversation();
  applyEvent(s, {
    type: "proposal",
    params: {
      proposalId: "p", turnId: "t", language: "python", code, autoRun: false,
      risk: { level: "medium", reasons: ["the code holds characters that change the order the text around them is shown in: <U+202E> (right-to-left override) on line 2, <U+2066> (left-to-right isolate) on line 2, <U+2069> (pop directional isolate) on line 2; what you read may not be what runs"] },
    },
  });
  const html = renderer.entry(s.entries[0], s);
  assert.doesNotMatch(html, RAW_HIDDEN, "no raw override or isolate in the HTML");
  const doc = dom(html);
  const line = doc.querySelectorAll("pre.code .line")[1];
  assert.equal(line.textContent, '    if user != "admin<U+202E> <U+2066>": # not admin<U+2069> <U+2066>:');
  assert.deepEqual(markers(html), ["<U+202E>", "<U+2066>", "<U+2069>", "<U+2066>"]);
  const first = doc.querySelector(".hidden-char");
  assert.equal(first?.getAttribute("title"), "U+202E, a character that changes the direction of the text around it");
  assert.equal(doc.querySelectorAll("pre.code .line").length, 4, "the line structure is the code's");
  assert.match(doc.querySelector(".risk-reasons li")?.textContent ?? "", /<U\+202E> \(right-to-left override\) on line 2/);
});

test("Trojan Source: an agent's (MCP) card and the code of an edited run show markers too", () => {
  const s = emptyConversation();
  applyEvent(s, {
    type: "proposal",
    params: {
      proposalId: "p1", turnId: "a-1", language: "python", code: "x = 1  # \u202Eevil", risk: { level: "medium", reasons: [] }, autoRun: false,
      origin: "agent", agent: "Claude Code", created: "2026-12-03T20:15:02Z",
    },
  });
  applyEvent(s, { type: "runStatus", params: { runId: "r1", state: "running", proposalId: "p1" } });
  applyEvent(s, { type: "runStarted", runId: "r1", code: "x = 2  # \u2066edited\u2069" });
  const card = renderer.entry(s.entries[0], s);
  assert.deepEqual(markers(card), ["<U+202E>"]);
  assert.doesNotMatch(card, RAW_HIDDEN);
  const run = renderer.entry(s.entries[1], s);
  assert.equal(dom(run).querySelector(".run-code summary")?.textContent, "Code as run (edited)");
  assert.deepEqual(markers(run), ["<U+2066>", "<U+2069>"]);
  assert.doesNotMatch(run, RAW_HIDDEN);
});

test("hidden characters: a zero-width space, a Hangul filler in a name and a tag character are markers", () => {
  const html = codeHtml("pri\u200Bnt(1)\n\u3164 = 2\nprint(\u3164)\nflag = 1\u{E0041}\n");
  assert.doesNotMatch(html, RAW_HIDDEN);
  assert.deepEqual(markers(html), ["<U+200B>", "<U+3164>", "<U+3164>", "<U+E0041>"]);
  const lines = [...dom(html).querySelectorAll(".line")].map((l) => l.textContent);
  assert.deepEqual(lines, ["pri<U+200B>nt(1)", "<U+3164> = 2", "print(<U+3164>)", "flag = 1<U+E0041>"]);
  assert.equal(dom(html).querySelector(".hidden-char")?.getAttribute("title"), "U+200B, a character that does not show");
  assert.equal(marker("\u202E"), "<U+202E>");
  assert.equal(marker("\u0007"), "<U+0007>");
  assert.equal(marker("\u{E0041}"), "<U+E0041>");
});

test("hidden characters: a lone carriage return is a marker in the one line it is on; CRLF line ends are lines, no marker", () => {
  const lone = codeHtml("x = 1\r import os\n");
  assert.doesNotMatch(lone, /\r/);
  assert.equal(dom(lone).querySelectorAll(".line").length, 1);
  assert.equal(dom(lone).querySelector(".line")?.textContent, "x = 1<U+000D> import os");
  assert.equal(dom(lone).querySelector(".hidden-char")?.getAttribute("title"), "U+000D, a carriage return: Python ends the line here");
  // A carriage return at the very end is followed by no line feed: lone too.
  assert.deepEqual(markers(codeHtml("x = 1\r")), ["<U+000D>"]);
  const crlf = codeHtml("a = 1\r\nb = 2\r\n");
  assert.doesNotMatch(crlf, /\r/);
  assert.deepEqual(markers(crlf), []);
  assert.equal(crlf, codeHtmlBefore("a = 1\nb = 2\n"), "a Windows file shows as its lines, as with line feeds alone");
  // Only the carriage return directly before the line feed is the line end.
  const both = codeHtml("a\r\r\nb");
  assert.deepEqual([...dom(both).querySelectorAll(".line")].map((l) => l.textContent), ["a<U+000D>", "b"]);
});

test("hidden characters: tabs and emoji stay as they are (⚠️, 👩‍💻, 👩🏽‍💻, ❤️‍🔥); a joiner anywhere else is a marker", () => {
  for (const code of ["\tprint('⚠️ careful')", "if x:\n\tprint('👩‍💻 coding')\n", "s = '👩🏽‍💻'", "print('❤️‍🔥 🏳️‍🌈')"]) {
    assert.equal(codeHtml(code), codeHtmlBefore(code), JSON.stringify(code));
    assert.deepEqual(markers(codeHtml(code)), []);
  }
  assert.deepEqual(markers(codeHtml("ab\u200Dc")), ["<U+200D>"], "between letters");
  assert.deepEqual(markers(codeHtml("'👩\u200D'")), ["<U+200D>"], "after a symbol, before a quote");
  assert.deepEqual(markers(codeHtml("\u200D💻")), ["<U+200D>"], "at the start");
});

test("hidden characters: Unicode's categories Cc Cf Co Cn Cs Zl Zp and Default_Ignorable_Code_Point, as the server has them", () => {
  const hidden = [
    "\u0000", "\u001B", "\u007F", "\u0085", "\u000B", "\u000C", // Cc
    "\u00AD", "\u200E", "\u061C", "\uFEFF", "\u2060", // Cf
    "\uE000", "\u{F0000}", // Co
    "\uFFFF", "\u{10FFFF}", // Cn
    "\uD800", "\uDC00", // Cs, a lone surrogate
    "\u2028", "\u2029", // Zl, Zp
    "\u115F", "\u1160", "\uFFA0", "\u180B", "\u180F", "\uFFF0", "\uFFF8", "\u{E0001}", "\u{E0FFF}", "\u034F", "\u17B4", // Default_Ignorable
  ];
  for (const char of hidden) assert.deepEqual(markers(codeHtml(`a${char}b`)), [marker(char)], marker(char));
  const shown = [
    "\uFE00", "\uFE0F", "\u{E0100}", "\u{E01EF}", // variation selectors
    "\u00A0", "\u3000", // spaces that show as spaces (Zs)
    "\u05D0", "\u0627", // right-to-left letters reorder nothing by themselves
    "\u0301", "é", "日", "\u{1F600}",
  ];
  for (const char of shown) assert.deepEqual(markers(codeHtml(`a${char}b`)), [], marker(char));
});

test("hidden characters: code without them renders byte for byte as before", () => {
  const samples = [
    "print(1)",
    "x = 1\ny = 2\n",
    "if a < b and c > d:\n\tprint(\"it's & done\")\n\n",
    "s = 'añö 日本 שלום مرحبا 😀'\n",
    "\n\n",
    "",
  ];
  for (const code of samples) assert.equal(codeHtml(code), codeHtmlBefore(code), JSON.stringify(code));
  assert.equal(
    codeHtml("print('<b>')\nx = 1\n"),
    '<pre class="code numbered" data-lines="2"><code><span class="line">print(&#39;&lt;b&gt;&#39;)</span>\n<span class="line">x = 1</span></code></pre>',
  );
});

test("hidden characters: code in the model's Markdown (fenced, indented, inline) shows markers; other Markdown is as before", () => {
  const text = "Try:\n```python\nif ok\u202E:\n    go()\n```\nor `x\u200By`, or\n\n    y = \u3164\n";
  const html = renderer.markdown(text);
  assert.doesNotMatch(html, RAW_HIDDEN);
  assert.deepEqual(markers(html), ["<U+202E>", "<U+200B>", "<U+3164>"]);
  // Through the sanitiser, the marker keeps its class and its title.
  assert.equal(dom(html).querySelector("pre code.language-python .hidden-char")?.getAttribute("title"), "U+202E, a character that changes the direction of the text around it");
  const plain = new MarkdownIt({ html: false, linkify: true, breaks: false });
  const clean = "Run `print(\"a & b\")`:\n```python\nprint('<b>')\n```\n\n    indented = 'x'\n\nand ```` ```` `` ` `` \u05D0.";
  assert.equal(renderer.markdown(clean), purify.sanitize(plain.render(clean)));
});

test("hidden characters: the definition is the server's, case by case (clients/hidden-characters.json)", () => {
  // Written from the server's safety/visible.py by tests/test_risk_visible.py, which checks it is current.
  const file = join(__dirname, "../../../../../clients/hidden-characters.json");
  const { cases } = JSON.parse(readFileSync(file, "utf8")) as { cases: { codePoints: number[]; hidden: number[] }[] };
  assert.ok(cases.length > 400);
  for (const { codePoints, hidden } of cases) {
    assert.deepEqual(hiddenAt(String.fromCodePoint(...codePoints)), hidden, JSON.stringify(codePoints));
  }
});
