// A scripted OpenAI-compatible chat endpoint on 127.0.0.1 for the end-to-end tests: the server reaches it
// through real litellm over real HTTP; only the model's words are scripted. Replies stream as
// `chat.completion.chunk` server-sent events, a few characters at a time.

import { createServer } from "node:http";

export class ScriptedModel {
  /** @type {{text: string, chunkDelayMs: number, firstDelayMs: number}[]} */
  replies = [];
  /** @type {{messages: {role: string, content: unknown}[]}[]} */
  requests = [];
  /** @type {((count: number) => void)[]} */
  waiters = [];
  server = createServer((req, res) => this.handle(req, res));

  /** @returns {Promise<string>} the base URL to give as apiBase */
  async start() {
    await new Promise((resolve) => this.server.listen(0, "127.0.0.1", () => resolve(undefined)));
    const address = this.server.address();
    if (!address || typeof address === "string") throw new Error("the scripted model did not get a port");
    return `http://127.0.0.1:${address.port}/v1`;
  }

  /**
   * Queues the model's next answer. With chunkDelayMs the answer streams at that pace (a slow model), so
   * a client's rendering of partial text can be seen.
   */
  reply(text, { chunkDelayMs = 0, firstDelayMs = 0 } = {}) {
    this.replies.push({ text, chunkDelayMs, firstDelayMs });
  }

  /** Resolves when the model has received `count` requests in all, or rejects after `timeoutMs`. */
  waitForRequests(count, timeoutMs) {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`the model got ${this.requests.length} requests, expected ${count} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      this.waiters.push((n) => {
        if (n >= count) {
          clearTimeout(timer);
          resolve();
          return true;
        }
        return false;
      });
    });
  }

  handle(req, res) {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      if (req.method !== "POST" || !req.url?.endsWith("/chat/completions")) {
        res.writeHead(404, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: `no such endpoint: ${req.method} ${req.url}` } }));
        return;
      }
      let body;
      try {
        body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
      } catch {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "the request body is not JSON" } }));
        return;
      }
      this.requests.push(body);
      this.waiters = this.waiters.filter((w) => !w(this.requests.length));
      const reply = this.replies.shift();
      if (reply === undefined) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: { message: "the scripted model has no reply queued for this request" } }));
        return;
      }
      const { text, chunkDelayMs, firstDelayMs } = reply;
      const id = `chatcmpl-scripted-${this.requests.length}`;
      const created = Math.floor(Date.now() / 1000);
      const usage = { prompt_tokens: 10, completion_tokens: Math.ceil(text.length / 4), total_tokens: 10 + Math.ceil(text.length / 4) };
      if (!body.stream) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({
          id, object: "chat.completion", created, model: "scripted",
          choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
          usage,
        }));
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
      const chunk = (delta, finish = null) =>
        `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: "scripted", choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      const pieces = [chunk({ role: "assistant", content: "" })];
      for (let i = 0; i < text.length; i += 12) pieces.push(chunk({ content: text.slice(i, i + 12) }));
      pieces.push(chunk({}, "stop"));
      if (body.stream_options?.include_usage) {
        pieces.push(`data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model: "scripted", choices: [], usage })}\n\n`);
      }
      pieces.push("data: [DONE]\n\n");
      if (chunkDelayMs === 0 && firstDelayMs === 0) {
        res.end(pieces.join(""));
        return;
      }
      const send = () => {
        const piece = pieces.shift();
        if (piece === undefined || res.destroyed) {
          res.end();
          return;
        }
        res.write(piece);
        setTimeout(send, chunkDelayMs);
      };
      // A model that takes its time before the first word (a local model loading, a long prompt).
      res.write(pieces.shift());
      setTimeout(send, firstDelayMs);
    });
  }

  /** Everything the model was shown in its n-th request (1-based), as one string. */
  requestText(n) {
    const request = this.requests[n - 1];
    if (!request) return "";
    return request.messages.map((m) => (typeof m.content === "string" ? m.content : JSON.stringify(m.content))).join("\n");
  }

  stop() {
    this.server.closeAllConnections?.();
    return new Promise((resolve) => this.server.close(() => resolve(undefined)));
  }
}
