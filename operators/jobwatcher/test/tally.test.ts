/** The deletion count shared by the Job controller and the watcher controllers. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { DeletionTally } from "../src/tally.ts";
import type { WatcherRef } from "../src/policy.ts";

const w: WatcherRef = { kind: "JobWatcher", namespace: "team", name: "w", uid: "w-1" };
const c: WatcherRef = { kind: "ClusterJobWatcher", name: "c", uid: "c-1" };

test("a delete is counted once it settled, and its DELETED event wakes the credited watcher", () => {
  const t = new DeletionTally();
  t.expect("job-1", w);
  assert.equal(t.inflight("w-1"), 1);
  // The event may come before the delete call returns: the watcher is woken anyway.
  assert.deepEqual(t.wake("job-1", "JobWatcher"), [{ namespace: "team", name: "w" }]);
  assert.deepEqual(t.total("w-1", 0), { total: 0, pending: 0 }, "not counted before it settled");
  t.settle(w, true);
  assert.equal(t.inflight("w-1"), 0);
  assert.deepEqual(t.total("w-1", 0), { total: 1, pending: 1 });
  t.written("w-1", 1, 1);
  assert.deepEqual(t.total("w-1", 0), { total: 1, pending: 0 }, "a stale status read never lowers the count");
  assert.deepEqual(t.total("w-1", 7), { total: 7, pending: 0 });
});

test("a failed delete is not counted, but the event of a racing successful one still wakes", () => {
  const t = new DeletionTally();
  t.expect("job-2", c);
  t.expect("job-2", c);
  t.settle(c, false);
  t.settle(c, true);
  assert.deepEqual(t.total("c-1", undefined), { total: 1, pending: 1 });
  assert.deepEqual(t.wake("job-2", "JobWatcher"), [], "only the controller of the credited kind wakes");
  assert.deepEqual(t.wake("job-2", "ClusterJobWatcher"), [{ namespace: undefined, name: "c" }]);
  assert.deepEqual(t.wake("job-2", "ClusterJobWatcher"), [], "once");
});
