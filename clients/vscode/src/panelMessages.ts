// Messages between the extension host and the panel's webview.

import type { ConversationState, PanelEvent } from "./conversation";

export type HostToPanel =
  | { type: "state"; state: ConversationState }
  | { type: "events"; events: PanelEvent[] }
  | { type: "kernel"; text: string; model: string; tooltip: string; context: string; contextTooltip: string }
  | { type: "focusInput" }
  /** The user just acted (sent a message, started a run): the next render scrolls to the end. */
  | { type: "follow" };

export type ProposalAction = "approve" | "reject" | "edit" | "insert";

export type PanelToHost =
  | { type: "ready" }
  | { type: "chat"; text: string }
  | { type: "interrupt" }
  /** Open a file a run touched; `path` is relative to the workspace root, as the server reported it. */
  | { type: "openFile"; path: string }
  | { type: ProposalAction; proposalId: string };
