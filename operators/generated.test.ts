/**
 * Every seed operator's checked-in config/ (CRDs, RBAC, manifests), chart/ and Dockerfile are exactly
 * what `opkit generate` makes of its src/operator.ts now: the operators' tests install those very CRDs
 * and run under that very RBAC, so a stale file would test something other than what ships. One check
 * for all of them, through the CLI users run in CI (`opkit generate --check`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const operators = fileURLToPath(new URL(".", import.meta.url));
const cli = join(
  dirname(createRequire(import.meta.url).resolve("@opkit/cli/package.json")),
  "bin",
  "opkit.js",
);
const projects = readdirSync(operators, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(operators, d.name, "src", "operator.ts")))
  .map((d) => d.name);

test("every seed operator is here", () => {
  assert.deepEqual(projects.sort(), [
    "acme-namespace",
    "appservice",
    "jobwatcher",
    "memcached",
    "scheduler",
    "webapp",
  ]);
});

for (const name of projects)
  test(`${name}: the generated files are up to date`, () => {
    const r = spawnSync(
      process.execPath,
      ["--conditions=opkit-source", cli, "generate", "--check", join(operators, name)],
      { encoding: "utf8", timeout: 120_000 },
    );
    assert.equal(r.status, 0, `${r.stderr}(in operators/${name})`);
    assert.equal(r.stdout.trim(), "up to date: nothing would change");
  });
