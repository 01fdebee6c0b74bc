/**
 * The checked-in config/ (CRDs, RBAC, manifests), chart/ and Dockerfile are exactly what `opkit generate`
 * makes of src/operator.ts now: the tests install those very CRDs and run under that very RBAC, so a
 * stale file would test something other than what ships.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

test("the generated files are up to date", () => {
  const root = fileURLToPath(new URL("..", import.meta.url));
  const cli = join(
    dirname(createRequire(import.meta.url).resolve("@opkit/cli/package.json")),
    "bin",
    "opkit.js",
  );
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", cli, "generate", root], {
    encoding: "utf8",
    timeout: 120_000,
  });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(
    r.stdout.trim(),
    "up to date: nothing changed",
    `opkit generate rewrote files; review and commit them:\n${r.stdout}`,
  );
});
