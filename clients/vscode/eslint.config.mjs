// Lint: typescript-eslint's recommended type-aware rules, plus the ones that catch unawaited promises.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import globals from "globals";

export default tseslint.config(
  { ignores: ["dist/**", "out/**", "node_modules/**", ".vscode-test/**", "*.mjs"] },
  js.configs.recommended,
  {
    // The e2e driver is plain Node ESM (it loads playwright-core from the test tools folder); the
    // functions it passes to evaluate() run in the page, with the browser's globals.
    files: ["test/e2e/**/*.mjs"],
    languageOptions: {
      globals: { ...globals.node, window: "readonly", document: "readonly", getComputedStyle: "readonly", requestAnimationFrame: "readonly", MutationObserver: "readonly" },
    },
  },
  ...tseslint.configs.recommendedTypeChecked.map((c) => ({ ...c, files: ["**/*.ts"] })),
  {
    files: ["**/*.ts"],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      eqeqeq: ["error", "always"],
    },
  },
  {
    files: ["test/**/*.ts"],
    // node:test's test() returns a promise that the runner itself awaits.
    rules: { "@typescript-eslint/no-floating-promises": "off" },
  },
);
