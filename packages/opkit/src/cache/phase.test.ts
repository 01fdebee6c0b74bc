import { test } from "node:test";
import assert from "node:assert/strict";
import {
  INITIAL_PHASE,
  reflectorStep,
  resumePoint,
  type ReflectorInput,
  type ReflectorPhase,
} from "./phase.ts";

function run(inputs: ReflectorInput[], from: ReflectorPhase = INITIAL_PHASE) {
  let phase = from;
  const steps = [];
  for (const input of inputs) {
    const step = reflectorStep(phase, input);
    steps.push(step);
    phase = step.phase;
  }
  return { phase, steps };
}

test("the first list is no relist and never backs off, also when it fails and is tried again", () => {
  const { phase, steps } = run([{ type: "listStarting" }, { type: "listStarting" }]);
  assert.deepEqual(phase, INITIAL_PHASE);
  assert.ok(steps.every((s) => !s.relist && !s.backoffFirst));
  assert.equal(resumePoint(phase), undefined);
});

test("a list syncs the reflector; events and bookmarks move the resume point", () => {
  const { phase } = run([
    { type: "listStarting" },
    { type: "listed", resourceVersion: "10" },
    { type: "delivered", resourceVersion: "11" },
    { type: "delivered", resourceVersion: undefined },
  ]);
  assert.deepEqual(phase, { name: "watching", resourceVersion: "11", relistsInARow: 0 });
  assert.equal(resumePoint(phase), "11");
});

test("410 Gone while watching relists; the first relist goes at once, the next in a row backs off", () => {
  const watching: ReflectorPhase = { name: "watching", resourceVersion: "10", relistsInARow: 0 };
  const { phase, steps } = run(
    [
      { type: "gone" },
      { type: "listStarting" },
      { type: "listed", resourceVersion: "20" },
      { type: "gone" },
      { type: "listStarting" },
    ],
    watching,
  );
  assert.equal(resumePoint(steps[0]!.phase), undefined, "no resume point once it expired");
  assert.deepEqual([steps[1]!.relist, steps[1]!.backoffFirst], [true, false]);
  assert.deepEqual([steps[4]!.relist, steps[4]!.backoffFirst], [true, true]);
  assert.deepEqual(phase, { name: "relisting", relistsInARow: 2 });
});

test("a delivered event between relists resets the count: the next relist goes at once", () => {
  const { steps } = run(
    [
      { type: "listStarting" },
      { type: "listed", resourceVersion: "20" },
      { type: "delivered", resourceVersion: "21" },
      { type: "gone" },
      { type: "listStarting" },
    ],
    { name: "relisting", relistsInARow: 3 },
  );
  assert.equal(steps[0]!.backoffFirst, true);
  assert.deepEqual([steps[4]!.relist, steps[4]!.backoffFirst], [true, false]);
});

test("a failed relist retried counts again and backs off (the list itself failed, no watch worked)", () => {
  const { steps } = run([{ type: "listStarting" }, { type: "listStarting" }], {
    name: "relisting",
    relistsInARow: 0,
  });
  assert.deepEqual(
    steps.map((s) => [s.relist, s.backoffFirst]),
    [
      [true, false],
      [true, true],
    ],
  );
});

test("410 before the first sync or during a relist leaves the phase as it is", () => {
  assert.deepEqual(reflectorStep(INITIAL_PHASE, { type: "gone" }).phase, INITIAL_PHASE);
  const relisting: ReflectorPhase = { name: "relisting", relistsInARow: 2 };
  assert.deepEqual(reflectorStep(relisting, { type: "gone" }).phase, relisting);
});
