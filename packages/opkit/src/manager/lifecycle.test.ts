import { test } from "node:test";
import assert from "node:assert/strict";
import {
  CREATED,
  isLeading,
  lostOf,
  managerStep,
  stopRequested,
  type ManagerEvent,
  type ManagerPhase,
} from "./lifecycle.ts";

type Phase = ManagerPhase<Error, Error>;
const opening = Promise.resolve();
const done = Promise.resolve();

function run(events: ManagerEvent<Error, Error>[], from: Phase = CREATED): Phase {
  return events.reduce<Phase>((p, e) => managerStep(p, e), from);
}

test("start, leader work, stop, stopped: leading until the stop ends, then a clean verdict", () => {
  const leading = run([{ type: "start", opening }, { type: "leaderWork" }]);
  assert.equal(leading.name, "leading");
  assert.equal(isLeading(leading), true);
  const stopping = managerStep(leading, { type: "stop", done });
  assert.equal(stopping.name, "stopping");
  assert.equal(stopRequested(stopping), true);
  assert.equal(isLeading(stopping), true, "leader work drains through a graceful stop");
  assert.ok(stopping.name === "stopping" && stopping.leaderWorkStarted && stopping.opening === opening);
  const stopped = managerStep(stopping, { type: "stopped", unclean: undefined });
  assert.deepEqual(stopped, { ...stopping, name: "stopped", unclean: undefined });
});

test("a standby that stops never started leader work", () => {
  const p = run([
    { type: "start", opening },
    { type: "stop", done },
  ]);
  assert.ok(p.name === "stopping" && !p.leaderWorkStarted && p.started);
  assert.equal(isLeading(p), false);
});

test("no leader work starts once a stop was asked for", () => {
  const p = run([{ type: "start", opening }, { type: "stop", done }, { type: "leaderWork" }]);
  assert.ok(p.name === "stopping" && !p.leaderWorkStarted);
});

test("a stop before start: start is remembered (no more add) but opens nothing", () => {
  const p = run([
    { type: "stop", done },
    { type: "start", opening },
  ]);
  assert.ok(p.name === "stopping" && p.started && p.opening === undefined);
});

test("a second stop keeps the first one's promise", () => {
  const other = Promise.resolve();
  const p = run([
    { type: "stop", done },
    { type: "stop", done: other },
  ]);
  assert.ok(p.name === "stopping" && p.done === done);
});

test("leadership is lost once; the loss is kept through the stop for run's verdict", () => {
  const first = new Error("first");
  const p = run([
    { type: "start", opening },
    { type: "leaderWork" },
    { type: "lost", error: first },
    { type: "lost", error: new Error("second") },
  ]);
  assert.equal(p.name, "lost");
  assert.equal(lostOf(p), first);
  assert.equal(isLeading(p), false);
  const stopped = run(
    [
      { type: "stop", done },
      { type: "stopped", unclean: undefined },
    ],
    p,
  );
  assert.equal(lostOf(stopped), first);
  assert.ok(stopped.name === "stopped" && stopped.leaderWorkStarted);
});

test("leadership lost during a stop is recorded, and ends leading", () => {
  const lost = new Error("renewal failed");
  const p = run([
    { type: "start", opening },
    { type: "leaderWork" },
    { type: "stop", done },
    { type: "lost", error: lost },
  ]);
  assert.equal(lostOf(p), lost);
  assert.equal(isLeading(p), false);
});

test("an unclean stop carries its error", () => {
  const unclean = new Error("grace period ended");
  const p = run([
    { type: "start", opening },
    { type: "stop", done },
    { type: "stopped", unclean },
  ]);
  assert.ok(p.name === "stopped" && p.unclean === unclean);
  assert.equal(
    managerStep(CREATED, { type: "stopped", unclean }),
    CREATED,
    "stopped without a stop is ignored",
  );
});
