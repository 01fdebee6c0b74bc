/**
 * docs/performance.md and its charts are what scripts/docs/performance.ts makes of
 * bench/results/latest.json: regenerating without a new bench run changes nothing, and the page carries
 * every figure of the run.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { loadResults, renderPerformance } from "./performance.ts";

test("regenerating the performance page from latest.json changes nothing (run the script after make bench)", () => {
  const results = loadResults();
  const first = renderPerformance(results);
  assert.deepEqual(renderPerformance(loadResults()), first, "the output depends on latest.json alone");
  for (const [path, text] of first) assert.equal(readFileSync(path, "utf8"), text, `${path} is out of date`);
});

test("the page lists every figure of the run and names its machine and command", () => {
  const results = loadResults();
  const page = [...renderPerformance(results).values()][0] as string;
  for (const f of results.figures) assert.ok(page.includes(`| ${f.name} |`), `${f.name} missing`);
  assert.ok(page.includes(results.command));
  assert.ok(page.includes(results.machine.node));
});
