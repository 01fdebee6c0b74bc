/** docs/architecture.md's import table says what eslint/architecture.js enforces, row by row. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ALLOWED_IMPORTS } from "../../eslint/architecture.js";

test("every folder's row in docs/architecture.md names exactly the folders eslint lets it import", () => {
  const page = readFileSync(join(import.meta.dirname, "..", "..", "docs", "architecture.md"), "utf8");
  const rows = new Map<string, string[]>();
  for (const m of page.matchAll(/^\| ([a-z, ]+) \| ([a-z, ]+) \|$/gm)) {
    if (m[1] === "folder") continue; // the header
    const allowed = m[2] === "nothing of opkit" ? [] : (m[2] as string).split(", ");
    for (const folder of (m[1] as string).split(", ")) rows.set(folder, allowed);
  }
  for (const [folder, allowed] of Object.entries(ALLOWED_IMPORTS))
    assert.deepEqual([...(rows.get(folder) ?? ["(no row)"])].sort(), [...allowed].sort(), `row of ${folder}`);
  assert.deepEqual([...rows.keys()].sort(), Object.keys(ALLOWED_IMPORTS).sort());
});
