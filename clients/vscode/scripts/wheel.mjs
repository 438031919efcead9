// Builds the server's wheel into server/ for the .vsix (the extension's managed install, serverInstall.ts).
// Uses the repository's .venv (`python -m build --wheel`, with uv as the build env's installer), else
// `uv build --wheel`. Any older wheel in server/ is removed: the .vsix carries exactly one.
import { execFileSync } from "node:child_process";
import console from "node:console";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, copyFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import process from "node:process";
import { delimiter, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ext = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const repo = resolve(ext, "../..");
const target = join(ext, "server");
const out = mkdtempSync(join(tmpdir(), "ilsp-wheel-"));
try {
  const venvBin = join(repo, ".venv/bin");
  const env = { ...process.env, PATH: `${venvBin}${delimiter}${process.env.PATH ?? ""}`, UV_PYTHON_DOWNLOADS: "never" };
  const [command, args] = existsSync(join(venvBin, "python"))
    ? [join(venvBin, "python"), ["-m", "build", "--wheel", "--installer", "uv", "--outdir", out, repo]]
    : ["uv", ["build", "--wheel", "--out-dir", out, repo]];
  execFileSync(command, args, { env, stdio: ["ignore", "ignore", "inherit"] });
  const wheels = readdirSync(out).filter((f) => /^interpreter_lsp-.+-py3-none-any\.whl$/.test(f));
  if (wheels.length !== 1) throw new Error(`expected one interpreter_lsp wheel, got: ${readdirSync(out).join(", ")}`);
  mkdirSync(target, { recursive: true });
  for (const old of readdirSync(target).filter((f) => f.endsWith(".whl"))) rmSync(join(target, old));
  copyFileSync(join(out, wheels[0]), join(target, wheels[0]));
  console.log(`server/${wheels[0]}`);
} finally {
  rmSync(out, { recursive: true, force: true });
}
