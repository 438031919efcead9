// Where the language server's executable comes from: the `interpreter.server.command` setting, else the
// `interpreter-lsp` beside the Python interpreter the user selected, else the one on PATH, else the
// extension's own managed install (serverInstall.ts). Pure functions, so the choice is unit-tested without
// VS Code.

import * as path from "node:path";

export const SERVER_EXECUTABLE = "interpreter-lsp";

export interface ServerCommand {
  command: string;
  args: string[];
  /** Where it came from, for messages: "setting", "python", "path", "managed" (the extension's own venv). */
  source: "setting" | "python" | "path" | "managed";
}

/** No server anywhere: the extension offers to install one (serverInstall.ts) instead of a bare error. */
export class ServerNotFoundError extends Error {}

/** Splits a command line the way a POSIX shell would for plain words and quotes (no expansions). */
export function splitCommandLine(line: string): string[] {
  const words: string[] = [];
  let word = "";
  let inWord = false;
  let quote: '"' | "'" | undefined;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) quote = undefined;
      else if (ch === "\\" && quote === '"' && i + 1 < line.length) word += line[++i];
      else word += ch;
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      inWord = true;
    } else if (ch === "\\" && i + 1 < line.length) {
      word += line[++i];
      inWord = true;
    } else if (/\s/.test(ch)) {
      if (inWord) words.push(word);
      word = "";
      inWord = false;
    } else {
      word += ch;
      inWord = true;
    }
  }
  if (quote) throw new Error(`interpreter.server.command has an unclosed ${quote} quote: ${line}`);
  if (inWord) words.push(word);
  return words;
}

/** The setting's value as argv, or undefined when it is unset or empty. Throws on a malformed value. */
export function commandFromSetting(value: unknown): string[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value === "string") {
    const argv = splitCommandLine(value.trim());
    return argv.length ? argv : undefined;
  }
  if (Array.isArray(value)) {
    if (!value.every((v): v is string => typeof v === "string")) {
      throw new Error("interpreter.server.command must be a list of strings, e.g. [\"/path/to/interpreter-lsp\"].");
    }
    const argv = value.filter((v) => v !== "");
    return argv.length ? argv : undefined;
  }
  throw new Error("interpreter.server.command must be a string or a list of strings.");
}

function executableName(platform: NodeJS.Platform): string {
  return platform === "win32" ? `${SERVER_EXECUTABLE}.exe` : SERVER_EXECUTABLE;
}

/** The server beside a Python interpreter: venv/bin/python -> venv/bin/interpreter-lsp. */
export function besidePython(pythonPath: string, platform: NodeJS.Platform = process.platform): string {
  const p = platform === "win32" ? path.win32 : path.posix;
  return p.join(p.dirname(pythonPath), executableName(platform));
}

/** The first `name` found in a PATH string, checked with `isExecutable`. */
export function findOnPath(
  name: string,
  pathValue: string | undefined,
  isExecutable: (file: string) => boolean,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  if (!pathValue) return undefined;
  const p = platform === "win32" ? path.win32 : path.posix;
  for (const dir of pathValue.split(p.delimiter)) {
    if (!dir) continue;
    const candidate = p.join(dir, name);
    if (isExecutable(candidate)) return candidate;
  }
  return undefined;
}

export interface ResolveInput {
  setting: unknown;
  /** The interpreter the Python extension has selected, when it is installed. */
  pythonPath?: string;
  pathValue?: string;
  platform?: NodeJS.Platform;
  isExecutable: (file: string) => boolean;
  /** The argv of the extension's own complete, up-to-date install, when there is one. */
  managed?: string[];
}

/** Picks the server command, or throws an Error whose message tells the user what to do. */
export function resolveServerCommand(input: ResolveInput): ServerCommand {
  const platform = input.platform ?? process.platform;
  const fromSetting = commandFromSetting(input.setting);
  if (fromSetting) {
    const [command, ...args] = fromSetting;
    return { command, args, source: "setting" };
  }
  if (input.pythonPath) {
    const candidate = besidePython(input.pythonPath, platform);
    if (input.isExecutable(candidate)) return { command: candidate, args: [], source: "python" };
  }
  const onPath = findOnPath(executableName(platform), input.pathValue, input.isExecutable, platform);
  if (onPath) return { command: onPath, args: [], source: "path" };
  if (input.managed?.length) {
    const [command, ...args] = input.managed;
    return { command, args, source: "managed" };
  }
  const where = input.pythonPath ? ` beside the selected Python (${input.pythonPath}) or` : "";
  throw new ServerNotFoundError(
    `The interpreter-lsp server was not found${where} on PATH. Install it into an environment of its own ` +
      `(Interpreter: Install or Update the Server; or, from a clone of the repository, pipx install ./interpreter-lsp: ` +
      `it is not on PyPI yet), or set interpreter.server.command to its path.`,
  );
}
