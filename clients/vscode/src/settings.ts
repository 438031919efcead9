// What the server is told about the user's settings. Only values the user set are sent, never VS Code's
// defaults (a default sent as a value would override the user's config file, docs/configuration.md), and
// values set for the workspace (workspace or folder settings, which a repository's .vscode/settings.json
// can fill) are marked as such under "$workspace": the server takes no setting that chooses where data
// goes or what runs from there.

/** The server's key for values the user set for this workspace rather than for themselves. */
export const WORKSPACE_LEVEL = "$workspace";

/** Keys of the `interpreter` section that only the client reads (the server command line). */
export function isClientOnly(key: string): boolean {
  return key === "server" || key.startsWith("server.");
}

/** What `WorkspaceConfiguration.inspect(key)` says of one setting (the parts read here). */
export interface InspectedSetting {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** Sets `a.b.c` in a nested object. */
function setPath(target: Record<string, unknown>, key: string, value: unknown): void {
  const parts = key.split(".");
  let node = target;
  for (const part of parts.slice(0, -1)) {
    const next = node[part];
    if (typeof next !== "object" || next === null || Array.isArray(next)) node[part] = {};
    node = node[part] as Record<string, unknown>;
  }
  node[parts[parts.length - 1]] = JSON.parse(JSON.stringify(value ?? null)) as unknown;
}

/**
 * The settings object for the server from inspected settings (keys relative to `interpreter`, dotted for
 * nested ones: "kernel.python"): user values at the top level, workspace and folder values (the folder's
 * win) under "$workspace", defaults never.
 */
export function userSettings(inspected: Readonly<Record<string, InspectedSetting>>): Record<string, unknown> {
  const user: Record<string, unknown> = {};
  const workspace: Record<string, unknown> = {};
  for (const [key, setting] of Object.entries(inspected)) {
    if (isClientOnly(key)) continue;
    if (setting.globalValue !== undefined) setPath(user, key, setting.globalValue);
    const local = setting.workspaceFolderValue !== undefined ? setting.workspaceFolderValue : setting.workspaceValue;
    if (local !== undefined) setPath(workspace, key, local);
  }
  if (Object.keys(workspace).length) user[WORKSPACE_LEVEL] = workspace;
  return user;
}

/** The setting keys (relative to `interpreter`) a manifest contributes. */
export function settingKeys(manifest: { contributes?: { configuration?: { properties?: Record<string, unknown> } } }): string[] {
  return Object.keys(manifest.contributes?.configuration?.properties ?? {})
    .filter((key) => key.startsWith("interpreter."))
    .map((key) => key.slice("interpreter.".length))
    .filter((key) => !isClientOnly(key));
}

export interface InitializationOptions {
  settings: Record<string, unknown>;
  capabilities: { input: boolean };
  trusted: boolean;
}

export function initializationOptions(settings: Record<string, unknown>, trusted: boolean): InitializationOptions {
  return { settings, capabilities: { input: true }, trusted };
}
