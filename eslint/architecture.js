// The house's arrows (the table of docs/architecture.md, which describes each folder): which folder of
// packages/opkit/src may import which. Everything else is a wrong-way import and fails `make lint`.
// Tests (*.test.ts) are exempt; example operators under testdata/ may use the public entries only.

/** folder → the folders it may import (besides itself). */
export const ALLOWED_IMPORTS = {
  clock: [],
  logging: [],
  pki: [],
  client: ["clock", "logging"],
  queue: ["clock"],
  metrics: ["clock", "queue", "client"],
  cache: ["client", "clock", "logging"],
  events: ["client", "clock"],
  api: ["client"],
  helpers: ["client", "clock", "cache", "events"],
  children: ["helpers", "client", "cache"],
  controller: ["queue", "cache", "client", "clock", "events", "logging", "metrics"],
  webhook: ["api", "client", "pki", "clock", "logging", "metrics"],
  sharding: ["client", "cache", "clock", "logging", "metrics"],
  manager: [
    "controller",
    "cache",
    "client",
    "clock",
    "events",
    "logging",
    "metrics",
    "webhook",
    "sharding",
    "migrate",
  ],
  generate: ["api", "client"],
  migrate: ["client", "clock", "logging"],
  // api, generate and webhook: checkConversion generates objects from a kind's schema and converts them.
  testenv: ["client", "pki", "clock", "logging", "api", "generate", "webhook"],
};

const FOLDERS = Object.keys(ALLOWED_IMPORTS);

/** One flat-config block per folder: `no-restricted-imports` of every folder its row does not name. */
export function architectureConfigs(root = "packages/opkit/src") {
  const blocks = FOLDERS.map((folder) => {
    const forbidden = FOLDERS.filter((f) => f !== folder && !ALLOWED_IMPORTS[folder].includes(f));
    return {
      files: [`${root}/${folder}/**/*.ts`],
      ignores: [`${root}/${folder}/**/*.test.ts`, `${root}/${folder}/**/testdata/**`],
      rules: {
        "no-restricted-imports": [
          "error",
          {
            patterns: [
              {
                group: [
                  ...forbidden.flatMap((f) => [`../${f}/*`, `../${f}/**`]),
                  "../index.ts",
                  "opkit",
                  "opkit/*",
                ],
                message: `${folder}/ may import only ${ALLOWED_IMPORTS[folder].join(", ") || "nothing of opkit"} (the table in docs/architecture.md)`,
              },
            ],
          },
        ],
      },
    };
  });
  // Tests are exempt: an integration test exercises the layers together (a controller test runs a
  // manager, a client test installs a generated CRD), and unit tests may use the test environment.
  // Operators, benchmarks, scripts, the fault suite, the CLI and example operators use the public entries only.
  blocks.push({
    files: [
      "packages/cli/**/*.ts",
      "operators/**/*.ts",
      "bench/**/*.ts",
      "scripts/**/*.ts",
      "faults/**/*.ts",
      `${root}/**/testdata/**/*.ts`,
    ],
    ignores: [`${root}/**/testdata/**/*.test.ts`],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              group: ["**/packages/opkit/src/**", "opkit/src/*", "opkit/dist/*"],
              message: "import the public entries only: opkit, opkit/generate, opkit/testenv",
            },
            {
              regex:
                "^\\.\\./\\.\\./(clock|client|queue|cache|events|api|helpers|children|controller|manager|metrics|logging|generate|testenv|pki|webhook|sharding|migrate)/",
              message: "import the public entries only: opkit, opkit/generate, opkit/testenv",
            },
          ],
        },
      ],
    },
  });
  return blocks;
}
