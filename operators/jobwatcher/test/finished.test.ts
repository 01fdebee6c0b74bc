/** The index of finished Jobs that a watcher's change fans out to. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { FinishedJobs } from "../src/finished.ts";

test("a watcher's change wakes the finished Jobs of its namespace, or of all for a cluster watcher", () => {
  const f = new FinishedJobs();
  f.add("a", "j1");
  f.add("a", "j2");
  f.add("a", "j1");
  f.add("b", "j3");
  assert.equal(f.size, 3);
  assert.deepEqual(f.requests("a"), [
    { namespace: "a", name: "j1" },
    { namespace: "a", name: "j2" },
  ]);
  assert.deepEqual(f.requests("c"), []);
  assert.equal(f.requests().length, 3);
  f.remove("a", "j1");
  f.remove("b", "j3");
  f.remove("b", "never-added");
  assert.deepEqual(f.requests(), [{ namespace: "a", name: "j2" }]);
});
