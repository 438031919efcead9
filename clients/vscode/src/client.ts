// The connection to the interpreter-lsp server: starts it through vscode-languageclient, passes settings and
// workspace trust, routes the protocol's notifications, answers `interpreter/input`, and sends commands.

import * as fs from "node:fs";
import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  ResponseError,
  State,
  type LanguageClientOptions,
  type ServerOptions,
} from "vscode-languageclient/node";
import {
  Commands,
  Notifications,
  Requests,
  type InputParams,
  type InputResult,
  type KernelStatusParams,
  type MessageParams,
  type OutputParams,
  type ProposalParams,
  type ProposalStatusParams,
  type RunStatusParams,
  type ServerCommand,
  type TurnStatusParams,
} from "./protocol";
import { resolveServerCommand, type ResolveInput, type ServerCommand as ServerArgv } from "./serverCommand";
import { initializationOptions, userSettings, type InspectedSetting } from "./settings";
import { SETTING_KEYS } from "./settingKeys";

/**
 * The `interpreter` section as the user set it: `inspect()` of every server setting, mapped by
 * userSettings (user values, workspace values marked as such, never defaults).
 */
function userSetSection(config: vscode.WorkspaceConfiguration): Record<string, unknown> {
  const inspected: Record<string, InspectedSetting> = {};
  for (const key of SETTING_KEYS) {
    const value = config.inspect(key);
    if (value) inspected[key] = value;
  }
  return userSettings(inspected);
}

export interface ProtocolListener {
  message(params: MessageParams): void;
  proposal(params: ProposalParams): void;
  output(params: OutputParams): void;
  runStatus(params: RunStatusParams): void;
  turnStatus(params: TurnStatusParams): void;
  kernelStatus(params: KernelStatusParams): void;
  proposalStatus(params: ProposalStatusParams): void;
  /**
   * A server command VS Code runs for the server (a code lens, a code action): the listener sends it with
   * `send` and shows a refusal itself (in the panel, once), instead of vscode-languageclient's raw toast.
   */
  serverCommand(command: string, args: unknown[], send: () => Promise<unknown>): Promise<unknown>;
  /** The server read the settings (`workspace/configuration`): its status may have changed. */
  configurationRead(): void;
  /** The server is being started. */
  starting(): void;
  /** The server is running (again): a fresh start or a restart. */
  started(): void;
  stopped(): void;
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

/** The interpreter the Python extension has selected, if it is installed; never required. */
async function selectedPython(folder: vscode.WorkspaceFolder | undefined): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension("ms-python.python");
  if (!extension) return undefined;
  try {
    const activation = extension.isActive ? Promise.resolve(extension.exports) : extension.activate();
    const timeout = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 5000));
    const api = (await Promise.race([activation, timeout])) as
      | { environments?: { getActiveEnvironmentPath?(resource?: vscode.Uri): { path?: string } } }
      | undefined;
    return api?.environments?.getActiveEnvironmentPath?.(folder?.uri)?.path;
  } catch {
    return undefined;
  }
}

/** A message a person can act on, from whatever a command's failure was. */
export function errorMessage(error: unknown): string {
  const message = error instanceof ResponseError || error instanceof Error ? error.message : String(error);
  // pygls prefixes JSON-RPC error messages with the error's name; the person wants the sentence.
  return message.replace(/^(Invalid Params|Internal Error|Invalid Request|Method Not Found): /, "");
}

export class InterpreterClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private starting: Promise<void> | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly output: vscode.OutputChannel,
    private readonly listener: ProtocolListener,
    /** Where the server comes from (the extension adds its managed install, serverInstallUi.ts). */
    private readonly resolveServer: (input: ResolveInput) => ServerArgv | Promise<ServerArgv> = resolveServerCommand,
  ) {}

  get running(): boolean {
    return this.client?.state === State.Running;
  }

  start(): Promise<void> {
    this.starting ??= this.doStart().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async doStart(): Promise<void> {
    this.listener.starting();
    try {
      await this.startClient();
    } catch (error) {
      this.listener.stopped();
      throw error;
    }
  }

  private async startClient(): Promise<void> {
    const folder = vscode.workspace.workspaceFolders?.[0];
    const config = vscode.workspace.getConfiguration("interpreter", folder?.uri);
    const server = await this.resolveServer({
      setting: config.get("server.command"),
      pythonPath: await selectedPython(folder),
      pathValue: process.env.PATH,
      isExecutable,
    });
    this.output.appendLine(`Starting ${[server.command, ...server.args].join(" ")} (from ${server.source})`);
    const serverOptions: ServerOptions = {
      command: server.command,
      args: server.args,
      options: { cwd: folder?.uri.fsPath },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [{ scheme: "file" }, { scheme: "untitled" }],
      outputChannel: this.output,
      // Re-read on each start. Only what the user set is sent: a client default never overrides the
      // user's config file (see settings.ts).
      initializationOptions: () =>
        initializationOptions(userSetSection(vscode.workspace.getConfiguration("interpreter", folder?.uri)), vscode.workspace.isTrusted),
      synchronize: { configurationSection: "interpreter" },
      middleware: {
        workspace: {
          // The server reads section "interpreter"; it never sees the client-only keys.
          configuration: async (params, token, next) => {
            const result = await next(params, token);
            this.listener.configurationRead();
            if (!Array.isArray(result)) return result;
            return result.map((value: unknown, i) => {
              const item = params.items[i];
              if (item?.section !== "interpreter" || !value || typeof value !== "object") return value;
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : folder?.uri;
              return userSetSection(vscode.workspace.getConfiguration("interpreter", scope));
            });
          },
        },
        executeCommand: (command, args) => {
          // Sent here rather than through `next`, whose failure handler shows a raw "Request
          // workspace/executeCommand failed." toast: the listener shows the server's sentence instead.
          const client = this.client;
          const send = async (): Promise<unknown> => {
            if (!client) throw new Error("The interpreter-lsp server is not running.");
            return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
          };
          return this.listener.serverCommand(command, args, send);
        },
      },
    };
    const client = new LanguageClient("interpreterLsp", "Interpreter", serverOptions, clientOptions);
    this.client = client;
    client.onNotification(Notifications.message, (p: MessageParams) => this.listener.message(p));
    client.onNotification(Notifications.proposal, (p: ProposalParams) => this.listener.proposal(p));
    client.onNotification(Notifications.output, (p: OutputParams) => this.listener.output(p));
    client.onNotification(Notifications.runStatus, (p: RunStatusParams) => this.listener.runStatus(p));
    client.onNotification(Notifications.turnStatus, (p: TurnStatusParams) => this.listener.turnStatus(p));
    client.onNotification(Notifications.kernelStatus, (p: KernelStatusParams) => this.listener.kernelStatus(p));
    client.onNotification(Notifications.proposalStatus, (p: ProposalStatusParams) => this.listener.proposalStatus(p));
    client.onRequest(Requests.input, (p: InputParams) => this.askInput(p));
    this.disposables.push(
      client.onDidChangeState((change) => {
        if (change.newState === State.Running) this.listener.started();
        else if (change.newState === State.Starting) this.listener.starting();
        else if (change.newState === State.Stopped) this.listener.stopped();
      }),
    );
    await client.start();
  }

  private async askInput(params: InputParams): Promise<InputResult | null> {
    const value = await vscode.window.showInputBox({
      title: "The running code asks for input",
      prompt: params.prompt || "Input",
      password: params.password,
      ignoreFocusOut: true,
    });
    return value === undefined ? null : { value };
  }

  async restart(): Promise<void> {
    if (this.starting) await this.starting.catch(() => undefined);
    await this.stop();
    await this.start();
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    this.disposables.splice(0).forEach((d) => {
      d.dispose();
    });
    if (client && client.state !== State.Stopped) {
      try {
        await client.stop(5000);
      } catch (error) {
        this.output.appendLine(`Stopping the server: ${errorMessage(error)}`);
      }
    }
    if (client) this.listener.stopped();
  }

  /** Sends one of the protocol's commands; rejects with the server's message when it refuses. */
  async command<T>(command: ServerCommand, args: object = {}): Promise<T> {
    if (this.starting) await this.starting;
    const client = this.client;
    if (!client || client.state !== State.Running) {
      throw new Error("The interpreter-lsp server is not running. Run 'Interpreter: Restart Server', or see 'Interpreter: Show Server Log'.");
    }
    return (await client.sendRequest(ExecuteCommandRequest.type, { command, arguments: [args] })) as T;
  }

  /** Converters between VS Code and LSP types, for uris and ranges sent in commands. */
  get converter(): LanguageClient["code2ProtocolConverter"] | undefined {
    return this.client?.code2ProtocolConverter;
  }

  dispose(): void {
    void this.stop();
  }
}

export { Commands };
