// A real Jupyter Kernel Gateway for the end-to-end tests, started as tests/gateways.py starts it: from the
// virtualenv scripts/setup.d/gateways.sh makes in .venv-gateways/kg, on 127.0.0.1 and a free port, with a
// token, in a clean environment (its kernels see nothing of the editor's), in a process group of its own
// that the test kills (SIGKILL: the gateway is gone at once, as on a crash) and starts again on the same
// port. Waits are bounded on events (its log, its HTTP answer), never fixed sleeps.

import { spawn } from "node:child_process";
import { appendFileSync, existsSync, mkdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

import { freePort } from "./vscode.mjs";

export const GATEWAY_TOKEN = "test-gateway-token-1f9c2e";
const SETUP_HINT = "run `bash scripts/setup.d/gateways.sh` (scripts/setup.sh does it for the full setup)";

/** Why a Kernel Gateway cannot be started here (a skip reason), or undefined. */
export function kernelGatewayMissing(repo) {
  const exe = join(repo, ".venv-gateways/kg/bin/jupyter-kernelgateway");
  return existsSync(exe) ? undefined : `${relative(repo, exe)} is not installed: ${SETUP_HINT}`;
}

/** `promise`, or `fallback` after `ms` (the timer cleared either way: it keeps nothing alive). */
function within(promise, ms, fallback) {
  let timer;
  const timeout = new Promise((r) => {
    timer = setTimeout(() => r(fallback), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

const liveGroups = new Set();
process.on("exit", () => {
  for (const pid of liveGroups) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
});

export class KernelGateway {
  /** @param {{repo: string, workdir: string, log: string, token?: string}} options log: the gateway's own log file */
  constructor(options) {
    this.venv = join(options.repo, ".venv-gateways/kg");
    this.workdir = options.workdir;
    this.logFile = options.log;
    this.token = options.token ?? GATEWAY_TOKEN;
    this.port = 0;
    this.process = undefined;
  }

  get url() {
    return `http://127.0.0.1:${this.port}`;
  }

  /** Starts the gateway (on the port it had before, when it ran already) and waits until it answers. */
  async start(timeoutMs = 60_000) {
    if (!this.port) this.port = await freePort();
    const home = join(this.workdir, "gateway-home");
    mkdirSync(home, { recursive: true });
    const env = {
      PATH: `${join(this.venv, "bin")}:${process.env.PATH ?? "/usr/bin:/bin"}`,
      HOME: home,
      JUPYTER_RUNTIME_DIR: join(home, "runtime"),
      JUPYTER_DATA_DIR: join(this.venv, "share/jupyter"),
      LANG: "C.UTF-8",
    };
    const args = [
      "--KernelGatewayApp.ip=127.0.0.1",
      `--KernelGatewayApp.port=${this.port}`,
      "--KernelGatewayApp.port_retries=0",
      `--KernelGatewayApp.auth_token=${this.token}`,
      // GET /api/kernels, for the test's own checks (the server never lists kernels).
      "--JupyterWebsocketPersonality.list_kernels=True",
    ];
    appendFileSync(this.logFile, `--- starting the gateway on ${this.url}\n`);
    const child = spawn(join(this.venv, "bin/jupyter-kernelgateway"), args, {
      cwd: this.workdir,
      env,
      detached: true, // a process group of its own: kill() takes the gateway and what it started with it
      stdio: ["ignore", "pipe", "pipe"],
    });
    this.process = child;
    liveGroups.add(child.pid);
    this.exited = new Promise((r) => child.once("exit", (code, signal) => r({ code, signal })));
    for (const stream of [child.stdout, child.stderr]) {
      stream.setEncoding("utf8");
      stream.on("data", (d) => appendFileSync(this.logFile, d));
    }
    await this.waitReady(timeoutMs);
  }

  /** Waits until GET /api/kernelspecs answers 200 with the token. */
  async waitReady(timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    const child = this.process;
    let last = "";
    while (Date.now() < deadline) {
      if (child.exitCode !== null || child.signalCode !== null) {
        throw new Error(`the Kernel Gateway exited (${child.exitCode ?? child.signalCode}): ${this.logTail()}`);
      }
      try {
        const response = await this.get("/api/kernelspecs", 2000);
        if (response.status === 200) return;
        last = `HTTP ${response.status}`;
      } catch (error) {
        last = String(error);
      }
      // The next chunk of its log (it logs when it listens), or a short bound: a process we started.
      await new Promise((r) => {
        const done = () => {
          clearTimeout(t);
          child.stderr.off("data", done);
          r(undefined);
        };
        const t = setTimeout(done, 250);
        child.stderr.on("data", done);
      });
    }
    throw new Error(`the Kernel Gateway did not answer on ${this.url} within ${timeoutMs} ms (${last}): ${this.logTail()}`);
  }

  get(path, timeoutMs = 10_000) {
    return fetch(`${this.url}${path}`, { headers: { Authorization: `token ${this.token}` }, signal: AbortSignal.timeout(timeoutMs) });
  }

  /** The kernels the gateway has now (GET /api/kernels). */
  async kernels() {
    const response = await this.get("/api/kernels");
    if (response.status !== 200) throw new Error(`GET /api/kernels: HTTP ${response.status}`);
    return response.json();
  }

  /** SIGKILL the gateway's process group: it is gone at once, as on a crash; resolves once it exited. */
  async kill() {
    const child = this.process;
    if (!child) return;
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
    await within(this.exited, 30_000, undefined);
    liveGroups.delete(child.pid);
    this.process = undefined;
  }

  /** SIGTERM, then SIGKILL when it does not exit in time. */
  async stop() {
    const child = this.process;
    if (!child) return;
    try {
      process.kill(-child.pid, "SIGTERM");
    } catch {
      // already gone
    }
    const done = await within(this.exited.then(() => true), 15_000, false);
    if (!done) await this.kill();
    liveGroups.delete(child.pid);
    this.process = undefined;
  }

  logTail() {
    try {
      return readFileSync(this.logFile, "utf8").slice(-2000);
    } catch {
      return "(no log)";
    }
  }
}
