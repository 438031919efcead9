import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Commands, Notifications, Requests } from "../../src/protocol";

// The client and server spell every protocol name the same way: compare with protocol.py.
const protocolPy = readFileSync(join(__dirname, "../../../../../server/interpreter_lsp/protocol.py"), "utf8");

function serverNames(pattern: RegExp): string[] {
  return [...protocolPy.matchAll(pattern)].map((m) => m[1]).sort();
}

// Names agreed for this round whose server side is built in parallel: the client may know them before the
// server does. Once protocol.py has them, the comparison is exact again.
const AGREED_AHEAD = new Set(["interpreter.compact"]);

test("the client knows exactly the server's commands", () => {
  const server = serverNames(/^[A-Z_]+ = "(interpreter\.[A-Za-z]+)"$/gm);
  const client = Object.values(Commands).filter((name) => server.includes(name) || !AGREED_AHEAD.has(name));
  assert.deepEqual(client.sort(), server);
});

test("the client knows exactly the server's notifications and requests", () => {
  assert.deepEqual(
    [...Object.values(Notifications), ...Object.values(Requests)].sort(),
    serverNames(/^[A-Z_]+ = "(interpreter\/[A-Za-z]+)"$/gm),
  );
});

test("the extension's own command ids never collide with the server's", () => {
  const manifest = JSON.parse(readFileSync(join(__dirname, "../../../package.json"), "utf8")) as {
    contributes: { commands: { command: string }[] };
  };
  const serverCommands = new Set<string>(Object.values(Commands));
  for (const { command } of manifest.contributes.commands) {
    assert.ok(!serverCommands.has(command), `${command} collides with a server command`);
    assert.match(command, /^interpreterLsp\./);
  }
});
