import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { after, describe, test } from "node:test";
import { resolveServerCommand, ServerNotFoundError } from "../../src/serverCommand";
import {
  InstallError,
  MANAGED_DIR,
  STAMP_FILE,
  choosePython,
  installServer,
  installSource,
  managedCommand,
  managedState,
  needsProviders,
  parsePythonVersion,
  pipActivity,
  pythonCandidates,
  runProcess,
  shippedWheel,
  tailLines,
  type InstallStep,
  type Stamp,
} from "../../src/serverInstall";

const stamp = (over: Partial<Stamp> = {}): string =>
  JSON.stringify({
    extensionVersion: "0.2.0",
    wheel: "interpreter_lsp-0.2.0-py3-none-any.whl",
    serverVersion: "0.2.0",
    python: "/usr/bin/python3",
    pythonVersion: "3.12.1",
    installedAt: "2026-01-01T00:00:00Z",
    ...over,
  });

test("the managed server comes after the setting, the selected Python and PATH", () => {
  const managed = managedCommand("/store/server-venv", "linux");
  assert.deepEqual(managed, ["/store/server-venv/bin/python", "-I", "-m", "interpreter_lsp"]);
  const base = { setting: undefined, pathValue: "/usr/bin", platform: "linux" as const, managed };
  assert.deepEqual(resolveServerCommand({ ...base, isExecutable: () => false }), {
    command: "/store/server-venv/bin/python",
    args: ["-I", "-m", "interpreter_lsp"],
    source: "managed",
  });
  assert.equal(resolveServerCommand({ ...base, isExecutable: (f) => f === "/usr/bin/interpreter-lsp" }).source, "path");
  assert.equal(resolveServerCommand({ ...base, setting: "/x/lsp", isExecutable: () => false }).source, "setting");
  // Nothing anywhere: the error the extension answers with its offer to install.
  assert.throws(
    () => resolveServerCommand({ ...base, managed: undefined, isExecutable: () => false }),
    (e: unknown) => e instanceof ServerNotFoundError && /Install or Update the Server/.test(e.message),
  );
});

test("the install's state: missing, current, or outdated and why", () => {
  const files = new Map<string, string>();
  const venv = "/store/server-venv";
  const input = {
    venv,
    extensionVersion: "0.2.0",
    wheel: "interpreter_lsp-0.2.0-py3-none-any.whl",
    readFile: (f: string) => files.get(f),
    isExecutable: (f: string) => f === `${venv}/bin/python`,
    platform: "linux" as const,
  };
  assert.deepEqual(managedState(input), { kind: "missing" }, "a venv without its stamp never finished: not used");
  files.set(`${venv}/${STAMP_FILE}`, stamp());
  const current = managedState(input);
  assert.equal(current.kind, "current");
  assert.deepEqual(current.kind === "current" && current.command, managedCommand(venv, "linux"));
  files.set(`${venv}/${STAMP_FILE}`, stamp({ extensionVersion: "0.1.0" }));
  assert.deepEqual(managedState(input), { kind: "outdated", command: managedCommand(venv, "linux"), reason: "it was installed by version 0.1.0", usable: true });
  files.set(`${venv}/${STAMP_FILE}`, stamp({ wheel: "interpreter_lsp-0.1.9-py3-none-any.whl" }));
  assert.match(managedState(input).kind === "outdated" ? JSON.stringify(managedState(input)) : "", /holds interpreter_lsp-0\.1\.9/);
  files.set(`${venv}/${STAMP_FILE}`, stamp());
  const gone = managedState({ ...input, isExecutable: () => false });
  assert.equal(gone.kind === "outdated" && gone.usable, false, "a venv whose Python was removed is not used");
  files.set(`${venv}/${STAMP_FILE}`, "{torn");
  assert.equal(managedState(input).kind, "outdated");
});

test("the shipped wheel is found by its name; versions sort numerically", () => {
  assert.equal(shippedWheel(["README.md"]), undefined);
  assert.deepEqual(shippedWheel(["interpreter_lsp-0.9.0-py3-none-any.whl", "interpreter_lsp-0.10.0-py3-none-any.whl", "other-1.0-py3-none-any.whl"]), {
    file: "interpreter_lsp-0.10.0-py3-none-any.whl",
    version: "0.10.0",
  });
});

test("Python for the venv: the selected one only in a trusted workspace, then python3 and python on PATH", () => {
  const isExecutable = (f: string): boolean => ["/usr/bin/python3", "/usr/bin/python", "/ws/.venv/bin/python"].includes(f);
  const base = { pathValue: "/opt/none:/usr/bin", isExecutable, platform: "linux" as const };
  assert.deepEqual(pythonCandidates({ ...base, selected: "/ws/.venv/bin/python", trusted: true }), ["/ws/.venv/bin/python", "/usr/bin/python3", "/usr/bin/python"]);
  assert.deepEqual(pythonCandidates({ ...base, selected: "/ws/.venv/bin/python", trusted: false }), ["/usr/bin/python3", "/usr/bin/python"]);
  assert.deepEqual(parsePythonVersion("3.10.13\n"), [3, 10, 13]);
  assert.equal(parsePythonVersion("Python 3.10"), undefined);
  assert.deepEqual(
    choosePython([
      { path: "/ws/.venv/bin/python", version: "3.9.18" },
      { path: "/usr/bin/python3", version: "3.10.0" },
    ]),
    { path: "/usr/bin/python3", version: "3.10.0" },
  );
  assert.throws(
    () =>
      choosePython([
        { path: "/ws/.venv/bin/python", version: "3.9.18" },
        { path: "/usr/bin/python", version: "2.7.18" },
        { path: "/usr/bin/python3", error: "exit 1" },
      ]),
    (e: unknown) =>
      e instanceof InstallError &&
      e.message.includes("Python 3.10 or newer") &&
      e.message.includes("/ws/.venv/bin/python (3.9.18), /usr/bin/python (2.7.18), /usr/bin/python3 (exit 1)"),
  );
  assert.throws(() => choosePython([]), /found no python3 on PATH/);
});

test("the providers extra (litellm) is installed only for a model the server does not speak to itself", () => {
  assert.equal(needsProviders([]), false); // no model: a local server is looked for
  assert.equal(needsProviders([undefined, null, ""]), false);
  for (const model of ["gpt-4o-mini", "o3-mini", "claude-sonnet-4-5", "openai/qwen", "anthropic/claude-sonnet-4-5",
                       "ollama_chat/qwen2.5-coder", "ollama/llama3", "lm_studio/qwen", "hosted_vllm/m"]) {
    assert.equal(needsProviders([model]), false, model);
  }
  for (const model of ["gemini/gemini-2.0-flash", "bedrock/anthropic.claude-v2", "mistral/mistral-large", "command-r"]) {
    assert.equal(needsProviders([model]), true, model);
  }
  assert.equal(needsProviders(["openai/qwen", "groq/llama3-70b"]), true); // the review model needs it
});

test("what the managed install installs: the user's installSource, else the shipped wheel, else a message that works", () => {
  const exists = (f: string) => f === "/home/me/interpreter-lsp" || f === "/srv/interpreter_lsp-0.2.0-py3-none-any.whl";
  assert.deepEqual(installSource("", "/ext/server/interpreter_lsp-0.1.0-py3-none-any.whl", exists), {
    source: "/ext/server/interpreter_lsp-0.1.0-py3-none-any.whl",
    label: "interpreter_lsp-0.1.0-py3-none-any.whl",
  });
  // A clone, a wheel elsewhere, a git URL: pip installs each; the stamp names it whole.
  assert.deepEqual(installSource(" /home/me/interpreter-lsp ", undefined, exists), { source: "/home/me/interpreter-lsp", label: "/home/me/interpreter-lsp" });
  assert.equal(installSource("/srv/interpreter_lsp-0.2.0-py3-none-any.whl", "/ext/x.whl", exists).source, "/srv/interpreter_lsp-0.2.0-py3-none-any.whl");
  assert.equal(installSource("git+https://example.org/interpreter-lsp.git", undefined, exists).source, "git+https://example.org/interpreter-lsp.git");
  assert.throws(() => installSource("/nowhere/x.whl", undefined, exists), /installSource names \/nowhere\/x\.whl, which does not exist/);
  assert.throws(() => installSource("relative/dir", undefined, exists), /must be an absolute path or a URL/);
  // Nothing to install from: never "pip install interpreter-lsp" (it is not on PyPI), but what works.
  assert.throws(
    () => installSource(undefined, undefined, exists),
    (e: unknown) => e instanceof InstallError && /not published on PyPI/.test(e.message) && /interpreter\.server\.installSource/.test(e.message) && !/pipx install interpreter-lsp\b/.test(e.message),
  );
});

test("pip's output: what it is doing, and the last lines for an error", () => {
  assert.equal(pipActivity("Collecting litellm>=1.82.0 (from interpreter-lsp==0.1.0)"), "collecting litellm");
  assert.equal(pipActivity("  Collecting pyzmq[extra]>=25"), "collecting pyzmq");
  assert.equal(pipActivity("Installing collected packages: six, zmq"), "installing the packages");
  assert.equal(pipActivity("  Downloading foo.whl (1 MB)"), undefined);
  assert.equal(tailLines("a\n\nb\r\nc\n", 2), "b\nc");
});

test("a tool that hangs is stopped by the bound or by Cancel, and says so", async () => {
  const options = { cwd: os.tmpdir(), env: process.env };
  const slow = await runProcess("sh", ["-c", "echo started; exec sleep 600"], { ...options, timeoutMs: 1000 });
  assert.notEqual(slow.code, 0);
  assert.match(slow.tail, /started[\s\S]*\(stopped after 1 s\)/);
  const abort = new AbortController();
  const cancelled = runProcess("sh", ["-c", "echo started; exec sleep 600"], { ...options, timeoutMs: 600_000, signal: abort.signal, onLine: () => abort.abort() });
  assert.match((await cancelled).tail, /\(cancelled\)/);
  const missing = await runProcess("/nonexistent/python3", [], { ...options, timeoutMs: 10_000 });
  assert.equal(missing.code, null);
  assert.match(missing.tail, /ENOENT/);
});

// ---- a real install: a real Python makes a real venv, and pip installs a small wheel made here -----------

/** A wheel of a stand-in `interpreter_lsp` (no dependencies: pip needs no index): answers --version. */
function makeWheel(dir: string, version: string, serverModule = "", requires = ""): string {
  const file = path.join(dir, `interpreter_lsp-${version}-py3-none-any.whl`);
  const script = `
import sys, zipfile
file, version, server, requires = sys.argv[1:5]
files = {
  "interpreter_lsp/__init__.py": "__version__ = %r\\n" % version,
  "interpreter_lsp/__main__.py": "import sys\\nfrom . import __version__\\nif '--version' in sys.argv: print('interpreter-lsp', __version__)\\n",
  "interpreter_lsp/server.py": server,
  "interpreter_lsp-%s.dist-info/METADATA" % version: "Metadata-Version: 2.1\\nName: interpreter-lsp\\nVersion: %s\\n%s" % (version, "Requires-Dist: %s\\n" % requires if requires else ""),
  "interpreter_lsp-%s.dist-info/WHEEL" % version: "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
}
record = "interpreter_lsp-%s.dist-info/RECORD" % version
with zipfile.ZipFile(file, "w") as z:
  for name, text in files.items(): z.writestr(name, text)
  z.writestr(record, "".join("%s,,\\n" % n for n in list(files) + [record]))
`;
  execFileSync("python3", ["-c", script, file, version, serverModule, requires]);
  return file;
}

describe("a real install into a temporary global storage", { timeout: 10 * 60_000 }, () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "ilsp-install-test-"));
  const storageDir = path.join(root, "storage");
  const venv = path.join(storageDir, MANAGED_DIR);
  const pythons = pythonCandidates({ trusted: true, pathValue: process.env.PATH, isExecutable: (f) => fs.existsSync(f) });
  const state = (extensionVersion: string) =>
    managedState({ venv, extensionVersion, readFile: (f) => (fs.existsSync(f) ? fs.readFileSync(f, "utf8") : undefined), isExecutable: (f) => fs.existsSync(f) });
  const leftovers = () => fs.readdirSync(storageDir).filter((n) => n !== MANAGED_DIR);
  after(() => fs.rmSync(root, { recursive: true, force: true }));

  const install = (wheel: string, extensionVersion: string, env: NodeJS.ProcessEnv = process.env) => {
    const steps: InstallStep[] = [];
    const log: string[] = [];
    const promise = installServer({
      storageDir,
      wheel,
      extensionVersion,
      pythons,
      env,
      report: (step) => {
        if (steps[steps.length - 1] !== step) steps.push(step);
      },
      log: (line) => log.push(line),
    });
    return { promise, steps, log };
  };

  test("installs, checks the server, and stamps the venv last", async () => {
    const { promise, steps, log } = install(makeWheel(root, "0.1.0"), "0.1.0");
    const result = await promise;
    assert.deepEqual(steps, ["python", "venv", "pip", "check"]);
    assert.equal(result.stamp.serverVersion, "0.1.0");
    assert.equal(result.stamp.wheel, "interpreter_lsp-0.1.0-py3-none-any.whl");
    assert.equal(state("0.1.0").kind, "current");
    assert.equal(state("0.2.0").kind, "outdated");
    assert.deepEqual(leftovers(), [], "no temporary venv is left");
    // The renamed venv runs its server (the command the client starts), from any working directory.
    const answer = execFileSync(result.command[0], [...result.command.slice(1), "--version"], { cwd: root, encoding: "utf8" });
    assert.equal(answer.trim(), "interpreter-lsp 0.1.0");
    assert.ok(log.some((l) => l.includes("Successfully installed interpreter-lsp-0.1.0")), "pip's output went to the log");
  });

  test("a failed install leaves the previous one in place and nothing half-made", async () => {
    // No network: the wheel needs a dependency, and the only package index does not answer (pip's own
    // configuration, through its environment variables; the machine's pip.conf is left out).
    const offline: NodeJS.ProcessEnv = { ...process.env, PIP_CONFIG_FILE: os.devNull, PIP_INDEX_URL: "http://127.0.0.1:9/simple", PIP_RETRIES: "0", PIP_TIMEOUT: "10" };
    delete offline.PIP_FIND_LINKS;
    delete offline.PIP_EXTRA_INDEX_URL;
    const needsIndex = makeWheel(root, "0.2.0", "", "interpreter-lsp-test-dependency");
    await assert.rejects(install(needsIndex, "0.2.0", offline).promise, (e: unknown) => {
      assert.ok(e instanceof InstallError);
      assert.match(e.message, /pip could not install the server.*package index reachable/);
      assert.match(e.outputTail, /interpreter-lsp-test-dependency/, "the error carries pip's last lines");
      return true;
    });
    assert.equal(state("0.1.0").kind, "current", "the earlier install still serves");
    assert.deepEqual(leftovers(), []);
    // A server that installs but cannot load its modules is not put in place either.
    await assert.rejects(install(makeWheel(root, "0.2.0", "raise ImportError('no pygls')\n"), "0.2.0").promise, /cannot load its modules/);
    assert.equal(state("0.1.0").kind, "current");
    assert.deepEqual(leftovers(), []);
  });

  test("an install from the user's source (a wheel outside the extension) is stamped with it and current for it", async () => {
    const elsewhere = fs.mkdtempSync(path.join(root, "source-"));
    const wheel = makeWheel(elsewhere, "0.3.0");
    const result = await installServer({
      storageDir, wheel, label: wheel, extensionVersion: "0.3.0", pythons, env: process.env, report: () => undefined, log: () => undefined,
    });
    assert.equal(result.stamp.wheel, wheel);
    const read = (f: string) => (fs.existsSync(f) ? fs.readFileSync(f, "utf8") : undefined);
    assert.equal(managedState({ venv, extensionVersion: "0.3.0", wheel, readFile: read, isExecutable: (f) => fs.existsSync(f) }).kind, "current");
    // Going back to the shipped wheel is an update.
    assert.equal(managedState({ venv, extensionVersion: "0.3.0", wheel: "interpreter_lsp-0.3.0-py3-none-any.whl", readFile: read, isExecutable: (f) => fs.existsSync(f) }).kind, "outdated");
    await result.cleanup;
  });

  test("a new extension version replaces the install", async () => {
    const result = await install(makeWheel(root, "0.2.0"), "0.2.0").promise;
    assert.equal(state("0.2.0").kind, "current");
    await result.cleanup;
    assert.deepEqual(leftovers(), [], "the replaced venv is removed");
  });
});
