/**
 * Which events wake pending pods: a node change that can change a decision (not a heartbeat), and a
 * bound pod that goes or finishes (not one that starts).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Node, Pod } from "opkit";
import {
  boundPodFreed,
  isPendingFor,
  nodeSchedulingChanged,
  oncePerTurn,
  topScores,
} from "../src/controllers/scheduler.ts";
import { node, pod } from "./helpers.ts";

describe("event filters", () => {
  it("node updates: labels, taints, cordon, size and readiness count; heartbeats do not", () => {
    const base = node("a", { labels: { zone: "a" } });
    const beat = structuredClone(base);
    (beat.status!.conditions![0] as { lastHeartbeatTime?: string }).lastHeartbeatTime =
      "2026-01-01T00:00:00Z";
    assert.equal(nodeSchedulingChanged.update!(base, beat), false);
    for (const changed of [
      node("a", { labels: { zone: "b" } }),
      node("a", { labels: { zone: "a" }, taints: [{ key: "k", effect: "NoSchedule" }] }),
      node("a", { labels: { zone: "a" }, unschedulable: true }),
      node("a", { labels: { zone: "a" }, cpu: "8" }),
      node("a", { labels: { zone: "a" }, ready: false }),
    ] as Node[]) {
      assert.equal(nodeSchedulingChanged.update!(base, changed), true, JSON.stringify(changed));
    }
  });

  it("bound pods wake pending ones when they go or finish", () => {
    const bound = pod({ nodeName: "a" });
    const done: Pod = { ...bound, status: { phase: "Succeeded" } };
    assert.equal(boundPodFreed.delete!(bound), true);
    assert.equal(boundPodFreed.delete!(pod()), false, "an unbound pod held nothing");
    assert.equal(boundPodFreed.update!(bound, done), true);
    assert.equal(boundPodFreed.update!(bound, bound), false);
    assert.equal(boundPodFreed.create!(bound), false);
  });

  it("a pod is pending for a scheduler name while unbound, alive and unfinished", () => {
    const names = new Set(["opkit-scheduler"]);
    const mine = (
      o: Partial<NonNullable<Pod["spec"]>>,
      meta: Partial<Pod["metadata"]> = {},
      phase?: "Failed",
    ): Pod => {
      const p = pod();
      return {
        ...p,
        metadata: { ...p.metadata, ...meta },
        spec: { ...p.spec!, schedulerName: "opkit-scheduler", ...o },
        status: { phase },
      };
    };
    assert.equal(isPendingFor(names, mine({})), true);
    assert.equal(isPendingFor(names, pod()), false, "default-scheduler's");
    assert.equal(isPendingFor(names, mine({ nodeName: "a" })), false);
    assert.equal(isPendingFor(names, mine({}, { deletionTimestamp: "2026-01-01T00:00:00Z" })), false);
    assert.equal(isPendingFor(names, mine({}, {}, "Failed")), false);
  });
});

describe("the decision's log line", () => {
  it("names the best scores only, best first, ties by node name", () => {
    assert.deepEqual(Object.entries(topScores({ c: 5, a: 7, b: 7, d: 1 }, 3)), [
      ["a", 7],
      ["b", 7],
      ["c", 5],
    ]);
    assert.deepEqual(topScores({ a: 1 }, 3), { a: 1 });
  });
});

describe("the pending pods a node or a freed pod wakes", () => {
  it("are listed once per turn of the event loop, again after it, and per cache", () => {
    let calls = 0;
    const resets: (() => void)[] = [];
    const keys = oncePerTurn(
      (cache: object) => {
        calls++;
        return [cache, calls];
      },
      (reset) => resets.push(reset),
    );
    const a = {};
    const b = {};
    assert.deepEqual(keys(a), [a, 1]);
    assert.deepEqual(keys(a), [a, 1], "the same turn: the first answer");
    assert.equal(calls, 1);
    assert.deepEqual(keys(b), [b, 2], "another cache is listed on its own");
    assert.equal(resets.length, 1, "one reset per turn");
    resets.shift()!();
    assert.deepEqual(keys(b), [b, 3], "the next turn lists again");
  });
});
