// The extension's own install of the server: a virtualenv in the extension's global storage
// (`<globalStorage>/server-venv`), made from the wheel shipped inside the .vsix (`server/*.whl`), its
// dependencies from the user's package index (pip's own configuration: PIP_INDEX_URL, pip.conf, proxies).
// It never touches the user's project environment: the kernel runs the workspace's .venv anyway.
//
// An install is built in a temporary directory beside the final one and renamed into place only when the
// server in it answers; a stamp file inside records what was installed, so a new extension version installs
// its own wheel. Venvs are not relocatable through their console scripts (the shebangs name the temporary
// path), so the server is started as `<venv>/bin/python -I -m interpreter_lsp`; -I also keeps the
// workspace (the server's working directory) off sys.path, so a repository cannot shadow the server's modules.
//
// No VS Code here (serverInstallUi.ts shows it): the decisions are pure functions, and the install itself
// runs real processes, so both are unit-tested with node's test runner.

import { spawn } from "node:child_process";
import * as fs from "node:fs";
import * as path from "node:path";
import { findOnPath } from "./serverCommand";

export const MANAGED_DIR = "server-venv";
export const STAMP_FILE = "interpreter-lsp-install.json";
export const MIN_PYTHON = [3, 10] as const;
const WHEEL_PATTERN = /^interpreter_lsp-([^-]+)-py3-none-any\.whl$/;
/** Leftovers of an install that died (a crash, a closed window) older than this are removed. */
const STALE_MS = 60 * 60_000;

/** What an install wrote into its venv, last, when everything else had worked. */
export interface Stamp {
  extensionVersion: string;
  wheel: string;
  serverVersion: string;
  python: string;
  pythonVersion: string;
  installedAt: string;
}

export type ManagedState =
  | { kind: "missing" }
  | { kind: "current"; command: string[]; stamp: Stamp }
  /** Installed by another extension version (or with another wheel), or its Python is gone. */
  | { kind: "outdated"; command: string[]; reason: string; usable: boolean };

/** An install failed: `message` is for the person, `outputTail` the last lines of what the tools printed. */
export class InstallError extends Error {
  constructor(
    message: string,
    readonly outputTail: string = "",
  ) {
    super(message);
  }
}

export function venvPython(venv: string, platform: NodeJS.Platform = process.platform): string {
  return platform === "win32" ? path.win32.join(venv, "Scripts", "python.exe") : path.posix.join(venv, "bin", "python");
}

/** How the managed server is started (see the module comment for -I). */
export function managedCommand(venv: string, platform: NodeJS.Platform = process.platform): string[] {
  return [venvPython(venv, platform), "-I", "-m", "interpreter_lsp"];
}

export function parseStamp(text: string): Stamp | undefined {
  try {
    const value = JSON.parse(text) as Partial<Stamp> | null;
    if (value && typeof value.extensionVersion === "string" && typeof value.wheel === "string") return value as Stamp;
  } catch {
    // a torn or foreign file: as if there were none
  }
  return undefined;
}

/** A pip requirement that is not a local path: a VCS or web URL (`git+https://…`, `https://…/x.whl`). */
function isUrl(source: string): boolean {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(source) || /^git\+/i.test(source);
}

/**
 * What the managed install installs, and how its stamp names it: the user's `interpreter.server.installSource`
 * (a wheel, a clone of the repository, or a git URL: interpreter-lsp is not on PyPI yet) when set, else the
 * wheel the .vsix carries. Without either: an error that says what to do instead of `pip install
 * interpreter-lsp`, which would fail.
 */
export function installSource(
  setting: unknown,
  shipped: string | undefined,
  exists: (file: string) => boolean = fs.existsSync,
): { source: string; label: string } {
  const configured = typeof setting === "string" ? setting.trim() : "";
  if (configured) {
    if (isUrl(configured)) return { source: configured, label: configured };
    if (!path.isAbsolute(configured)) {
      throw new InstallError(`interpreter.server.installSource must be an absolute path or a URL; got ${configured}.`);
    }
    if (!exists(configured)) {
      throw new InstallError(`interpreter.server.installSource names ${configured}, which does not exist. Point it at a wheel (interpreter_lsp-….whl), a clone of the interpreter-lsp repository, or a git URL (git+https://…).`);
    }
    return { source: configured, label: configured };
  }
  if (shipped) return { source: shipped, label: path.basename(shipped) };
  throw new InstallError(
    "This build of the extension carries no server wheel, and interpreter-lsp is not published on PyPI yet. " +
      "Set interpreter.server.installSource (user settings) to a wheel (interpreter_lsp-….whl), a clone of the " +
      "repository, or a git URL (git+https://…), then run Interpreter: Install or Update the Server; or install the " +
      "server yourself from a clone (pipx install ./path/to/interpreter-lsp) and set interpreter.server.command.",
  );
}

/** The wheel the .vsix carries, from the names in its `server/` folder; undefined when there is none. */
export function shippedWheel(names: readonly string[]): { file: string; version: string } | undefined {
  const wheels = names
    .map((file) => ({ file, match: WHEEL_PATTERN.exec(file) }))
    .filter((w) => w.match)
    .sort((a, b) => a.file.localeCompare(b.file, undefined, { numeric: true }));
  const last = wheels[wheels.length - 1];
  return last?.match ? { file: last.file, version: last.match[1] } : undefined;
}

export interface StateInput {
  venv: string;
  extensionVersion: string;
  /** The shipped wheel's file name, when known: a different wheel is an update too. */
  wheel?: string;
  readFile: (file: string) => string | undefined;
  isExecutable: (file: string) => boolean;
  platform?: NodeJS.Platform;
}

/** Whether the managed install exists, is complete, and belongs to this extension version. */
export function managedState(input: StateInput): ManagedState {
  const text = input.readFile(path.join(input.venv, STAMP_FILE));
  if (text === undefined) return { kind: "missing" }; // no venv, or one an install never finished
  const command = managedCommand(input.venv, input.platform);
  const stamp = parseStamp(text);
  const usable = input.isExecutable(command[0]);
  if (!stamp) return { kind: "outdated", command, reason: `its ${STAMP_FILE} is unreadable`, usable: false };
  if (!usable) return { kind: "outdated", command, reason: `its Python (${stamp.python}) is gone`, usable };
  if (stamp.extensionVersion !== input.extensionVersion) {
    return { kind: "outdated", command, reason: `it was installed by version ${stamp.extensionVersion}`, usable };
  }
  if (input.wheel && stamp.wheel !== input.wheel) {
    return { kind: "outdated", command, reason: `it holds ${stamp.wheel}, not ${input.wheel}`, usable };
  }
  return { kind: "current", command, stamp };
}

/** "3.12.1" -> [3, 12, 1]; undefined for anything else. */
export function parsePythonVersion(text: string): [number, number, number] | undefined {
  const match = /^(\d+)\.(\d+)\.(\d+)/.exec(text.trim());
  return match ? [Number(match[1]), Number(match[2]), Number(match[3])] : undefined;
}

export function isSupportedPython(version: string): boolean {
  const v = parsePythonVersion(version);
  return !!v && (v[0] > MIN_PYTHON[0] || (v[0] === MIN_PYTHON[0] && v[1] >= MIN_PYTHON[1]));
}

export interface CandidateInput {
  /** The interpreter selected in the Python extension. */
  selected?: string;
  /** In an untrusted workspace the selected interpreter may be the repository's own: it is not started. */
  trusted: boolean;
  pathValue?: string;
  isExecutable: (file: string) => boolean;
  platform?: NodeJS.Platform;
}

/** The Pythons to create the venv with, in order: the selected one, then python3 and python on PATH. */
export function pythonCandidates(input: CandidateInput): string[] {
  const platform = input.platform ?? process.platform;
  const out: string[] = [];
  if (input.selected && input.trusted) out.push(input.selected);
  const names = platform === "win32" ? ["python.exe"] : ["python3", "python"];
  for (const name of names) {
    const found = findOnPath(name, input.pathValue, input.isExecutable, platform);
    if (found && !out.includes(found)) out.push(found);
  }
  return out;
}

export interface PythonProbe {
  path: string;
  /** "3.12.1", when it answered. */
  version?: string;
  error?: string;
}

/** The first probe of a Python >= 3.10, or an error that names every interpreter tried and what it was. */
export function choosePython(probes: readonly PythonProbe[]): { path: string; version: string } {
  const good = probes.find((p) => p.version && isSupportedPython(p.version));
  if (good?.version) return { path: good.path, version: good.version };
  const found = probes.map((p) => `${p.path} (${p.version ?? p.error ?? "no answer"})`);
  const what = found.length ? `found only ${found.join(", ")}` : "found no python3 on PATH";
  throw new InstallError(
    `The server needs Python ${MIN_PYTHON.join(".")} or newer to make its environment, and the extension ${what}. ` +
      `Install a newer Python (on PATH as python3), or select one with "Python: Select Interpreter".`,
  );
}

/** The last `count` non-empty lines of a tool's output. */
export function tailLines(text: string, count: number): string {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== "");
  return lines.slice(-count).join("\n");
}

/** What pip is doing, from one line of its output, for the progress notification ("litellm"). */
export function pipActivity(line: string): string | undefined {
  const collecting = /^\s*Collecting (\S+)/.exec(line);
  if (collecting) return `collecting ${collecting[1].replace(/[<>=!~;[].*$/, "")}`;
  if (/^\s*Installing collected packages/.test(line)) return "installing the packages";
  return undefined;
}

// ---- running the install -------------------------------------------------------------------------------

export interface RunResult {
  code: number | null;
  /** The last lines printed (stdout and stderr interleaved), for error messages. */
  tail: string;
}

export interface RunOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  timeoutMs: number;
  signal?: AbortSignal;
  onLine?: (line: string) => void;
}

/** Runs a program without a shell; resolves when it exits (or is killed on timeout or cancellation). */
export function runProcess(command: string, args: readonly string[], options: RunOptions): Promise<RunResult> {
  return new Promise((resolve) => {
    const lines: string[] = [];
    const push = (line: string): void => {
      lines.push(line);
      if (lines.length > 400) lines.splice(0, lines.length - 200);
      options.onLine?.(line);
    };
    let child;
    try {
      child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "pipe", "pipe"] });
    } catch (error) {
      resolve({ code: null, tail: String(error) });
      return;
    }
    let ended = false;
    const kill = (why: string): void => {
      if (ended) return;
      push(why);
      child.kill("SIGTERM");
      setTimeout(() => child.kill("SIGKILL"), 5000).unref();
    };
    const timer = setTimeout(() => kill(`(stopped after ${Math.round(options.timeoutMs / 1000)} s)`), options.timeoutMs);
    const onAbort = (): void => kill("(cancelled)");
    options.signal?.addEventListener("abort", onAbort);
    for (const stream of [child.stdout, child.stderr]) {
      let partial = "";
      stream.setEncoding("utf8");
      stream.on("data", (chunk: string) => {
        const parts = (partial + chunk).split(/\r?\n|\r/);
        partial = parts.pop() ?? "";
        parts.forEach(push);
      });
      stream.on("end", () => {
        if (partial) push(partial);
      });
    }
    const finish = (code: number | null, error?: Error): void => {
      if (ended) return;
      ended = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      if (error) push(`${command}: ${error.message}`);
      resolve({ code, tail: tailLines(lines.join("\n"), 25) });
    };
    child.on("error", (error) => finish(null, error));
    child.on("close", (code) => finish(code));
  });
}

export type InstallStep = "python" | "venv" | "pip" | "check";

export interface InstallOptions {
  /** The extension's global storage folder: the venv goes in `server-venv` inside it. */
  storageDir: string;
  /** What pip installs: a wheel or a source folder (an absolute path), or a URL (git+https://…). */
  wheel: string;
  /** How the stamp names it (installSource's label); the wheel's file name by default. */
  label?: string;
  extensionVersion: string;
  /** Pythons to try, in order (pythonCandidates). */
  pythons: readonly string[];
  env: NodeJS.ProcessEnv;
  /** A step begins, or pip says what it does (`detail`). */
  report: (step: InstallStep, detail?: string) => void;
  /** Every line the tools print, for the output channel. */
  log: (line: string) => void;
  signal?: AbortSignal;
  /** Bounds, in ms: making the venv, pip (downloads), the check. */
  timeouts?: { venv?: number; pip?: number; check?: number };
  platform?: NodeJS.Platform;
  /** The models the user configured (interpreter.model, reviewModel): they choose the extras (needsProviders). */
  models?: readonly (string | undefined | null)[];
}

/** Providers the server speaks to itself (server/interpreter_lsp/llm/routes.py); any other needs litellm. */
const DIRECT_PROVIDERS = new Set(["openai", "anthropic", "ollama", "ollama_chat", "lm_studio", "hosted_vllm", "llamafile"]);

/**
 * Whether the install needs the server's `providers` extra (litellm, with boto3, tokenizers...): a model of
 * a provider the server does not speak to itself. No model (a local server is found) or OpenAI-compatible,
 * Anthropic and Ollama models install without it (~150 MB less); a model set later that needs it says so.
 */
export function needsProviders(models: readonly (string | undefined | null)[] = []): boolean {
  return models.some((model) => {
    const name = (model ?? "").trim();
    if (!name) return false;
    const slash = name.indexOf("/");
    if (slash < 0) return !/^(gpt-|chatgpt-|o1|o3|o4|codex-|claude-)/.test(name);
    return !DIRECT_PROVIDERS.has(name.slice(0, slash));
  });
}

export interface InstallResult {
  venv: string;
  command: string[];
  stamp: Stamp;
  /** The replaced venv being removed (20,000 files): in the background, the new server need not wait. */
  cleanup: Promise<void>;
}

/** Removes a folder without blocking the event loop (the extension host) while 20,000 files go. */
function removeTree(dir: string): Promise<void> {
  return fs.promises.rm(dir, { recursive: true, force: true }).catch(() => undefined);
}

/** Asks each Python its version (without -I: Python 2 has none; -E -s keep its environment out). */
export async function probePythons(pythons: readonly string[], options: Pick<RunOptions, "cwd" | "env" | "signal">): Promise<PythonProbe[]> {
  const probes: PythonProbe[] = [];
  for (const python of pythons) {
    const lines: string[] = [];
    const result = await runProcess(python, ["-E", "-s", "-c", "import sys; print('%d.%d.%d' % tuple(sys.version_info[:3]))"], {
      ...options,
      timeoutMs: 60_000,
      onLine: (l) => lines.push(l),
    });
    const version = lines.map((l) => l.trim()).find((l) => parsePythonVersion(l));
    probes.push(result.code === 0 && version ? { path: python, version } : { path: python, error: tailLines(result.tail, 1) || `exit ${result.code}` });
    if (version && isSupportedPython(version)) break; // the first good one wins: no need to start the others
  }
  return probes;
}

/** Removes what died installs left behind (temporary and replaced venvs), when old enough to be dead. */
async function removeLeftovers(storageDir: string, now: number): Promise<void> {
  let names: string[];
  try {
    names = fs.readdirSync(storageDir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(`${MANAGED_DIR}.tmp-`) && !name.startsWith(`${MANAGED_DIR}.old-`)) continue;
    const full = path.join(storageDir, name);
    try {
      if (now - fs.statSync(full).mtimeMs > STALE_MS || name.startsWith(`${MANAGED_DIR}.old-`)) await removeTree(full);
    } catch {
      // another window removed it first
    }
  }
}

/**
 * Makes a fresh venv with the wheel installed, checks that its server answers, and only then puts it in
 * place of `server-venv` (a rename). On any failure the temporary venv is removed and an InstallError says
 * what failed, with the tool's last lines; an existing install is left as it was.
 */
export async function installServer(options: InstallOptions): Promise<InstallResult> {
  const { storageDir, env, signal, log } = options;
  const platform = options.platform ?? process.platform;
  const timeouts = { venv: 5 * 60_000, pip: 20 * 60_000, check: 2 * 60_000, ...options.timeouts };
  // Every tool runs in the storage folder, never in the workspace: `python -m` puts the working directory
  // on sys.path, and a repository's own `pip/` or `venv/` must not be what runs.
  const run = (command: string, args: string[], timeoutMs: number, onLine?: (line: string) => void): Promise<RunResult> => {
    log(`$ ${[command, ...args].join(" ")}`);
    return runProcess(command, args, {
      cwd: storageDir,
      env,
      timeoutMs,
      signal,
      onLine: (line) => {
        log(line);
        onLine?.(line);
      },
    });
  };
  const cancelled = (): void => {
    if (signal?.aborted) throw new InstallError("The install was cancelled.");
  };

  fs.mkdirSync(storageDir, { recursive: true });
  if (!isUrl(options.wheel) && !fs.existsSync(options.wheel)) throw new InstallError(`What the server is installed from is missing: ${options.wheel}`);
  void removeLeftovers(storageDir, Date.now());

  options.report("python");
  const probes = await probePythons(options.pythons, { cwd: storageDir, env, signal });
  cancelled();
  for (const p of probes) log(`Python ${p.path}: ${p.version ?? p.error}`);
  const python = choosePython(probes);

  const target = path.join(storageDir, MANAGED_DIR);
  const temp = fs.mkdtempSync(path.join(storageDir, `${MANAGED_DIR}.tmp-`));
  try {
    options.report("venv", `Python ${python.version}`);
    // mkdtemp made the folder; venv fills an existing empty one.
    let result = await run(python.path, ["-I", "-m", "venv", temp], timeouts.venv);
    cancelled();
    if (result.code !== 0) {
      throw new InstallError(
        `Making the server's environment with ${python.path} (Python ${python.version}) failed` +
          (/ensurepip/.test(result.tail) ? " (this Python lacks venv/ensurepip: on Debian or Ubuntu, install the python3-venv package)." : "."),
        result.tail,
      );
    }
    const tempPython = venvPython(temp, platform);
    options.report("pip");
    // --no-compile: byte-compiling every module of every package (litellm alone has thousands) doubled the
    // install on a busy machine; Python compiles what the server imports, once, on first use (as uv does).
    const requirement = needsProviders(options.models) ? `${options.wheel}[providers]` : options.wheel;
    const pipArgs = ["-I", "-m", "pip", "install", "--no-input", "--disable-pip-version-check", "--no-compile", requirement];
    result = await run(tempPython, pipArgs, timeouts.pip, (line) => {
      const activity = pipActivity(line);
      if (activity) options.report("pip", activity);
    });
    cancelled();
    if (result.code !== 0) {
      throw new InstallError(
        "pip could not install the server and its dependencies (is the package index reachable? pip's settings: PIP_INDEX_URL, pip.conf).",
        result.tail,
      );
    }
    options.report("check");
    const answer: string[] = [];
    result = await run(tempPython, ["-I", "-m", "interpreter_lsp", "--version"], timeouts.check, (line) => answer.push(line));
    const serverVersion = /^interpreter-lsp (\S+)/.exec(answer.join("\n").trim())?.[1];
    if (result.code !== 0 || !serverVersion) throw new InstallError("The installed server does not start.", result.tail);
    // The modules a session needs import (pygls, jupyter_client, ...): --version alone loads none of them.
    result = await run(tempPython, ["-I", "-c", "import interpreter_lsp.server"], timeouts.check);
    if (result.code !== 0) throw new InstallError("The installed server cannot load its modules.", result.tail);
    cancelled();

    const stamp: Stamp = {
      extensionVersion: options.extensionVersion,
      wheel: options.label ?? path.basename(options.wheel),
      serverVersion,
      python: python.path,
      pythonVersion: python.version,
      installedAt: new Date().toISOString(),
    };
    fs.writeFileSync(path.join(temp, STAMP_FILE), JSON.stringify(stamp, null, 2) + "\n");
    const old = swapIntoPlace(temp, target);
    log(`The server ${serverVersion} is installed in ${target}.`);
    return { venv: target, command: managedCommand(target, platform), stamp, cleanup: old ? removeTree(old) : Promise.resolve() };
  } finally {
    await removeTree(temp); // gone already when it was renamed
  }
}

/** Puts the finished venv at `target`; the one there before (if any) is moved aside: its path is returned. */
function swapIntoPlace(temp: string, target: string): string | undefined {
  let old: string | undefined;
  if (fs.existsSync(target)) {
    old = `${target}.old-${process.pid}-${Date.now()}`;
    fs.renameSync(target, old);
  }
  try {
    fs.renameSync(temp, target);
  } catch (error) {
    // Another window finished its own install in between: keep that one.
    if (fs.existsSync(path.join(target, STAMP_FILE))) return old;
    if (old) fs.renameSync(old, target);
    throw new InstallError(`Could not put the new environment in place at ${target}: ${String(error)}`);
  }
  // A server still running from the old venv keeps its open files; its next start uses the new one.
  return old;
}
