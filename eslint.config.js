// Lint rules for the whole workspace: typescript-eslint's type-checked recommended set, the rules that
// keep exported types honest (no `any`) and unused code out, and the architecture table (which folder
// may import which), so a wrong-way import fails `make lint`.
import js from "@eslint/js";
import tseslint from "typescript-eslint";
import { architectureConfigs } from "./eslint/architecture.js";

export default tseslint.config(
  { ignores: ["**/dist/**", "**/node_modules/**", "**/*.d.ts", "**/.opkit/**", "**/vendor/**"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      globals: { process: "readonly", console: "readonly", URL: "readonly" },
      parserOptions: {
        projectService: { allowDefaultProject: ["*.js", "eslint/*.js", "packages/cli/bin/*.js"] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      // Fakes implement async interfaces without awaiting anything; that is not a defect.
      "@typescript-eslint/require-await": "off",
      // node:test's describe/it/test return promises the runner tracks itself.
      "@typescript-eslint/no-floating-promises": [
        "error",
        {
          allowForKnownSafeCalls: [
            { from: "package", package: "node:test", name: ["describe", "it", "test", "suite"] },
          ],
        },
      ],
    },
  },
  { files: ["**/*.js"], ...tseslint.configs.disableTypeChecked },
  ...architectureConfigs(),
);
