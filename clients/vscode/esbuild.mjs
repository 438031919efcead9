// Bundles the extension (Node, CommonJS) and the panel script (browser, IIFE); with --tests, the unit tests.
import * as esbuild from "esbuild";
import { copyFileSync, mkdirSync, readdirSync } from "node:fs";

const production = process.argv.includes("--production");
const watch = process.argv.includes("--watch");
const tests = process.argv.includes("--tests");

const common = { bundle: true, sourcemap: !production, minify: production, logLevel: "warning", target: "es2022" };

const builds = [
  { ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", platform: "node", format: "cjs", external: ["vscode"] },
  { ...common, entryPoints: ["src/webview/main.ts"], outfile: "dist/webview.js", platform: "browser", format: "iife" },
];
if (tests) {
  const unit = readdirSync("test/unit").filter((f) => f.endsWith(".test.ts")).map((f) => `test/unit/${f}`);
  builds.push({ ...common, entryPoints: unit, outdir: "out/test/unit", platform: "node", format: "cjs", external: ["vscode", "jsdom"] });
}

// The panel's icons: VS Code's own codicon font, shipped beside the panel's script (CC-BY-4.0).
mkdirSync("dist", { recursive: true });
for (const file of ["codicon.css", "codicon.ttf"]) copyFileSync(`node_modules/@vscode/codicons/dist/${file}`, `dist/${file}`);

if (watch) {
  const contexts = await Promise.all(builds.map((b) => esbuild.context(b)));
  await Promise.all(contexts.map((c) => c.watch()));
} else {
  await Promise.all(builds.map((b) => esbuild.build(b)));
}
