// The panel's script, running inside the webview. It keeps a copy of the conversation, fed by batches of
// events from the extension host, and re-renders only the entries that changed, once per animation frame.

import DOMPurify from "dompurify";
import { activityLine, applyEvent, emptyConversation, type ConversationState } from "../conversation";
import type { HostToPanel, PanelToHost } from "../panelMessages";
import { createRenderer } from "./render";

interface VsCodeApi {
  postMessage(message: PanelToHost): void;
}
declare function acquireVsCodeApi(): VsCodeApi;

const vscode = acquireVsCodeApi();
const purify = DOMPurify(window);
const renderer = createRenderer((html) => purify.sanitize(html));

let state: ConversationState = emptyConversation();
let dirtyAll = true;
const dirty = new Set<string>();
let frameRequested = false;
/** The next render scrolls to the end whatever the position (the whole conversation just arrived). */
let followNext = true;
/** The view followed the end at the last render: images that load later keep it there. */
let following = true;

const list = document.getElementById("entries") as HTMLElement;
const activity = document.getElementById("activity") as HTMLElement;
const kernel = document.getElementById("kernel") as HTMLElement;
const contextUse = document.getElementById("context") as HTMLElement;
const modelName = document.getElementById("model") as HTMLElement;
const prompt = document.getElementById("prompt") as HTMLTextAreaElement;
const send = document.getElementById("send") as HTMLButtonElement;
const stop = document.getElementById("stop") as HTMLButtonElement;
const empty = document.getElementById("empty") as HTMLElement;

function nearBottom(): boolean {
  return window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
}

/** The space the fixed footer takes at the bottom of the view. */
function footerHeight(): number {
  return (document.getElementById("footer")?.getBoundingClientRect().height ?? 0) + 8;
}

/** Whether an element is wholly in the part of the view the footer does not cover. */
function inView(element: Element): boolean {
  const box = element.getBoundingClientRect();
  return box.top >= 0 && box.bottom <= window.innerHeight - footerHeight();
}

/** Pending proposals already brought into view once: the user may scroll away from one afterwards. */
const shownPending = new Set<string>();

/**
 * A proposal that waits for the user is never left out of sight: the first time it is drawn (or its
 * actions come back), the view scrolls just enough to show the whole card above the footer.
 */
function revealPending(): void {
  for (const card of list.querySelectorAll<HTMLElement>(".entry.proposal.status-pending")) {
    const id = card.dataset.id ?? "";
    if (shownPending.has(id)) continue;
    shownPending.add(id);
    if (!inView(card)) {
      const box = card.getBoundingClientRect();
      const room = window.innerHeight - footerHeight();
      // The card's bottom at the footer's top; a card taller than the view shows its top.
      const delta = box.height > room ? box.top : box.bottom - room;
      window.scrollBy(0, delta);
    }
  }
}

/** Marks code blocks whose lines run past the card's edge: they scroll sideways, and the card says so. */
function markOverflow(): void {
  for (const pre of list.querySelectorAll<HTMLElement>(".entry.proposal pre.code")) {
    const note = pre.nextElementSibling;
    const over = pre.scrollWidth > pre.clientWidth + 1;
    pre.classList.toggle("overflowing", over);
    if (note instanceof HTMLElement && note.classList.contains("code-overflow")) note.hidden = !over;
  }
}

let ticker: ReturnType<typeof setInterval> | undefined;
/** While the model is waited on, the activity line's clock moves once a second. */
function updateActivity(): void {
  const line = activityLine(state);
  activity.textContent = line;
  activity.hidden = line === "";
  stop.hidden = line === "" || line === "Waiting for your approval";
  activity.classList.toggle("waiting", line === "Waiting for your approval");
  const clocked = /^(Thinking|Answering|Condensing)/.test(line);
  if (clocked && ticker === undefined) ticker = setInterval(updateActivity, 1000);
  if (!clocked && ticker !== undefined) {
    clearInterval(ticker);
    ticker = undefined;
  }
}

function render(): void {
  frameRequested = false;
  const follow = followNext || nearBottom();
  followNext = false;
  if (dirtyAll) {
    list.innerHTML = state.entries.map((e) => renderer.entry(e, state)).join("");
  } else {
    for (const id of dirty) {
      const entry = state.entries.find((e) => e.id === id);
      const existing = list.querySelector(`[data-id="${CSS.escape(id)}"]`);
      if (!entry) {
        existing?.remove();
        continue;
      }
      const holder = document.createElement("div");
      holder.innerHTML = renderer.entry(entry, state);
      const fresh = holder.firstElementChild;
      if (!fresh) continue;
      if (existing) existing.replaceWith(fresh);
      else list.appendChild(fresh);
    }
  }
  dirtyAll = false;
  dirty.clear();
  updateActivity();
  empty.hidden = state.entries.length > 0;
  markOverflow();
  following = follow;
  if (follow) window.scrollTo(0, document.body.scrollHeight);
  revealPending();
}

// An image (a plot) gets its height when it has loaded, after the render that scrolled to the end.
list.addEventListener(
  "load",
  () => {
    if (following) window.scrollTo(0, document.body.scrollHeight);
  },
  true,
);
window.addEventListener("scroll", () => {
  following = nearBottom();
});

function schedule(): void {
  if (!frameRequested) {
    frameRequested = true;
    requestAnimationFrame(render);
  }
}

window.addEventListener("message", (event: MessageEvent<HostToPanel>) => {
  const message = event.data;
  switch (message.type) {
    case "state":
      state = message.state;
      dirtyAll = true;
      followNext = true;
      break;
    case "events":
      for (const panelEvent of message.events) {
        // The user's own action brings its result into view: the conversation again, their message, a
        // run they started (a code lens, Run Selection or Cell), whatever was scrolled to before.
        if (panelEvent.type === "history" || panelEvent.type === "user" || panelEvent.type === "runStarted") followNext = true;
        if (panelEvent.type === "runStatus" && panelEvent.params.state === "queued" && panelEvent.params.origin === "user") followNext = true;
        const change = applyEvent(state, panelEvent);
        if (change.all) dirtyAll = true;
        else change.ids.forEach((id) => dirty.add(id));
      }
      break;
    case "kernel":
      kernel.textContent = message.text;
      kernel.title = message.tooltip;
      modelName.textContent = message.model;
      modelName.title = message.model ? `Model: ${message.model}` : "";
      modelName.hidden = message.model === "";
      // Two forms of the meter: the narrow footer (≤ 360 px) shows "12.3k/128k", the wider one the words.
      contextUse.replaceChildren(
        Object.assign(document.createElement("span"), { className: "long", textContent: message.context }),
        Object.assign(document.createElement("span"), { className: "short", textContent: message.context.replace(/ \/ /, "/").replace(" tokens", "") }),
      );
      contextUse.title = message.contextTooltip;
      return;
    case "focusInput":
      prompt.focus();
      return;
    case "follow":
      followNext = true;
      break;
  }
  schedule();
});

function submit(): void {
  const text = prompt.value.trim();
  if (!text) return;
  vscode.postMessage({ type: "chat", text });
  prompt.value = "";
}

send.addEventListener("click", submit);
// "Waiting for your approval" takes the user to the proposal that waits.
activity.addEventListener("click", () => {
  const card = list.querySelector<HTMLElement>(".entry.proposal.status-pending");
  if (card) card.scrollIntoView({ block: "center" });
});
window.addEventListener("resize", markOverflow);
stop.addEventListener("click", () => vscode.postMessage({ type: "interrupt" }));
prompt.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    submit();
  }
});

list.addEventListener("click", (event) => {
  const target = (event.target as HTMLElement).closest<HTMLElement>("[data-action]");
  if (!target) return;
  event.preventDefault();
  const action = target.dataset.action;
  if (action === "openFile") {
    if (target.dataset.path) vscode.postMessage({ type: "openFile", path: target.dataset.path });
    return;
  }
  const proposalId = target.dataset.proposalId;
  if (!proposalId) return;
  if (action === "approve" || action === "reject" || action === "edit" || action === "insert") {
    // One click is one request: the buttons go quiet until the server's answer re-renders the card.
    target.closest(".actions")?.querySelectorAll("button").forEach((b) => (b.disabled = true));
    vscode.postMessage({ type: action, proposalId });
  }
});

vscode.postMessage({ type: "ready" });
