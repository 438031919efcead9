import assert from "node:assert/strict";
import { test } from "node:test";
import { besidePython, commandFromSetting, resolveServerCommand, splitCommandLine } from "../../src/serverCommand";
import manifest from "../../package.json";
import { initializationOptions, settingKeys, userSettings } from "../../src/settings";

test("a command line splits like a shell's words and quotes", () => {
  assert.deepEqual(splitCommandLine(`/opt/my env/bin/python -m interpreter_lsp`), ["/opt/my", "env/bin/python", "-m", "interpreter_lsp"]);
  assert.deepEqual(splitCommandLine(`"/opt/my env/bin/python" -m 'interpreter_lsp' a\\ b`), ["/opt/my env/bin/python", "-m", "interpreter_lsp", "a b"]);
  assert.throws(() => splitCommandLine(`"unclosed`), /unclosed " quote/);
});

test("the setting may be a string or a list; empty means unset; other types are refused", () => {
  assert.deepEqual(commandFromSetting(["/x/interpreter-lsp", "--log-level", "debug"]), ["/x/interpreter-lsp", "--log-level", "debug"]);
  assert.deepEqual(commandFromSetting("/x/interpreter-lsp --log-file /tmp/l"), ["/x/interpreter-lsp", "--log-file", "/tmp/l"]);
  assert.equal(commandFromSetting([]), undefined);
  assert.equal(commandFromSetting(""), undefined);
  assert.throws(() => commandFromSetting([1]), /list of strings/);
  assert.throws(() => commandFromSetting(3), /string or a list/);
});

test("resolution order: setting, then beside the selected Python, then PATH; else a clear error", () => {
  const exists = new Set(["/venv/bin/interpreter-lsp", "/usr/local/bin/interpreter-lsp"]);
  const isExecutable = (f: string) => exists.has(f);
  const base = { pathValue: "/usr/bin:/usr/local/bin", platform: "linux" as const, isExecutable };
  assert.deepEqual(resolveServerCommand({ ...base, setting: ["/custom", "-v"], pythonPath: "/venv/bin/python" }), {
    command: "/custom",
    args: ["-v"],
    source: "setting",
  });
  assert.equal(resolveServerCommand({ ...base, setting: [], pythonPath: "/venv/bin/python" }).command, "/venv/bin/interpreter-lsp");
  assert.equal(resolveServerCommand({ ...base, setting: [], pythonPath: "/other/bin/python" }).command, "/usr/local/bin/interpreter-lsp");
  assert.throws(
    () => resolveServerCommand({ ...base, setting: undefined, pythonPath: "/p/bin/python", isExecutable: () => false }),
    /not found beside the selected Python \(\/p\/bin\/python\) or on PATH.*interpreter\.server\.command/,
  );
  assert.equal(besidePython("C:\\venv\\Scripts\\python.exe", "win32"), "C:\\venv\\Scripts\\interpreter-lsp.exe");
});

test("the server gets only what the user set: user values on top, workspace values under $workspace, never defaults", () => {
  const settings = userSettings({
    model: { defaultValue: "", globalValue: "openai/x" },
    autoRun: { defaultValue: false }, // never set: the user's config file must decide, not VS Code's default
    maxSteps: { defaultValue: 20, workspaceValue: 5 },
    apiBase: { defaultValue: "", workspaceValue: "http://evil.example/v1", workspaceFolderValue: "http://folder/v1" },
    "kernel.python": { defaultValue: "", globalValue: ".venv/bin/python" },
    "kernel.gatewayKernels": { defaultValue: {}, globalValue: { python: "py" } },
    "server.command": { defaultValue: [], globalValue: ["/x"] },
  });
  assert.deepEqual(settings, {
    model: "openai/x",
    kernel: { python: ".venv/bin/python", gatewayKernels: { python: "py" } },
    $workspace: { maxSteps: 5, apiBase: "http://folder/v1" },
  });
  assert.deepEqual(userSettings({ autoRun: { defaultValue: false } }), {}, "nothing set: nothing sent");
  assert.deepEqual(initializationOptions(settings, false), { settings, capabilities: { input: true }, trusted: false });
});

test("the setting keys come from the manifest, without the client-only server command", () => {
  const keys = settingKeys(manifest);
  assert.ok(keys.includes("model") && keys.includes("kernel.python") && keys.includes("autoRun"));
  assert.ok(!keys.some((k) => k.startsWith("server")));
});
