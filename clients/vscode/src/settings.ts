// What the server is told about the user's settings, and how it is started.

/** Keys of the `interpreter` section that only the client reads. */
const CLIENT_ONLY_KEYS = new Set(["server"]);

/** The `interpreter` section as the server sees it: the client-only keys removed. */
export function serverSettings(section: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(section)) {
    if (CLIENT_ONLY_KEYS.has(key) || typeof value === "function") continue;
    out[key] = value;
  }
  return out;
}

export interface InitializationOptions {
  settings: Record<string, unknown>;
  capabilities: { input: boolean };
  trusted: boolean;
}

export function initializationOptions(section: Record<string, unknown>, trusted: boolean): InitializationOptions {
  return { settings: serverSettings(section), capabilities: { input: true }, trusted };
}

/** VS Code's WorkspaceConfiguration as a plain JSON object (it carries methods besides the values). */
export function plainSection(config: object): Record<string, unknown> {
  return JSON.parse(JSON.stringify(config)) as Record<string, unknown>;
}
