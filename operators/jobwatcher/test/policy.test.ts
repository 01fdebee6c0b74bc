/** The merge rule, matching and validation as pure functions (no control plane). */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { DeepReadonly, Job } from "opkit";
import { ClusterJobWatcher, JobWatcher, type AnyJobWatcher } from "../src/api/v1/jobwatcher.ts";
import { compileWatcher, decide, finished } from "../src/policy.ts";
import { validateJobWatcherSpec } from "../src/validation.ts";

const T0 = Date.parse("2026-01-01T00:00:00Z");
let uid = 0;

function job(
  name: string,
  namespace: string,
  state: "succeeded" | "failed" | "running",
  extra: { suspend?: boolean; deleting?: boolean } = {},
): DeepReadonly<Job> {
  const conditions =
    state === "running"
      ? []
      : [
          {
            type: state === "succeeded" ? "Complete" : "Failed",
            status: "True",
            lastTransitionTime: new Date(T0).toISOString(),
          },
        ];
  return {
    apiVersion: "batch/v1",
    kind: "Job",
    metadata: {
      name,
      namespace,
      uid: `job-${++uid}`,
      ...(extra.deleting ? { deletionTimestamp: new Date(T0).toISOString() } : {}),
    },
    spec: { suspend: extra.suspend, template: {} },
    status: { conditions },
  };
}

function watcher(
  name: string,
  spec: Partial<AnyJobWatcher["spec"]>,
  namespace?: string,
): DeepReadonly<AnyJobWatcher> {
  const kind = namespace === undefined ? ClusterJobWatcher : JobWatcher;
  const obj = kind.new(
    name,
    { checkIntervalSeconds: 300, ...spec },
    namespace === undefined ? {} : { namespace },
  );
  obj.metadata.uid = `${kind.kind}-${namespace ?? ""}-${name}`;
  return obj;
}

const compile = (...ws: DeepReadonly<AnyJobWatcher>[]) => ws.map(compileWatcher);

test("a finished Job expires at its finish time plus the TTL of its outcome", () => {
  const ws = compile(watcher("w", { ttlSecondsAfterSucceeded: 30, ttlSecondsAfterFailed: 90 }, "team"));
  const ok = decide(job("a", "team", "succeeded"), ws);
  const bad = decide(job("b", "team", "failed"), ws);
  assert.equal(ok.action, "delete");
  assert.equal(ok.action === "delete" && ok.at, T0 + 30_000);
  assert.equal(bad.action === "delete" && bad.at, T0 + 90_000);
  assert.equal(bad.action === "delete" && bad.outcome, "failed");
});

test("running, suspended and already deleting Jobs are never touched", () => {
  const ws = compile(watcher("w", { ttlSecondsAfterSucceeded: 0, ttlSecondsAfterFailed: 0 }, "team"));
  assert.deepEqual(decide(job("r", "team", "running"), ws), { action: "keep", why: "running" });
  assert.deepEqual(decide(job("s", "team", "succeeded", { suspend: true }), ws), {
    action: "keep",
    why: "suspended",
  });
  assert.deepEqual(decide(job("d", "team", "succeeded", { deleting: true }), ws), {
    action: "keep",
    why: "deleting",
  });
});

test("an absent TTL keeps Jobs of that outcome", () => {
  const ws = compile(watcher("w", { ttlSecondsAfterSucceeded: 10 }, "team"));
  assert.equal(decide(job("a", "team", "succeeded"), ws).action, "delete");
  assert.deepEqual(decide(job("b", "team", "failed"), ws), { action: "keep", why: "no-ttl" });
});

test("a namespaced JobWatcher never covers another namespace, whatever its patterns say", () => {
  const ws = compile(watcher("w", { ttlSecondsAfterSucceeded: 1, namespacePatterns: [".*"] }, "team"));
  assert.deepEqual(decide(job("a", "other", "succeeded"), ws), { action: "keep", why: "uncovered" });
  // Its patterns can narrow its own namespace away.
  const narrowed = compile(
    watcher("w", { ttlSecondsAfterSucceeded: 1, namespacePatterns: ["prod-.*"] }, "team"),
  );
  assert.deepEqual(decide(job("a", "team", "succeeded"), narrowed), { action: "keep", why: "uncovered" });
});

test("a ClusterJobWatcher covers namespaces by pattern; patterns match whole names", () => {
  const ws = compile(
    watcher("c", {
      ttlSecondsAfterSucceeded: 5,
      namespacePatterns: ["ci-.*"],
      jobNamePatterns: ["build-[0-9]+"],
    }),
  );
  assert.equal(decide(job("build-12", "ci-a", "succeeded"), ws).action, "delete");
  assert.equal(decide(job("build-12", "xci-a", "succeeded"), ws).action, "keep");
  assert.equal(decide(job("build-12x", "ci-a", "succeeded"), ws).action, "keep", "no partial name match");
  assert.equal(decide(job("rebuild-12", "ci-a", "succeeded"), ws).action, "keep");
});

test("merge: the longest applicable TTL wins, an absent one wins over all, and the decider is credited", () => {
  const short = watcher("short", { ttlSecondsAfterSucceeded: 10, ttlSecondsAfterFailed: 100 }, "team");
  const long = watcher(
    "long",
    { ttlSecondsAfterSucceeded: 60, ttlSecondsAfterFailed: 20, jobNamePatterns: ["x-.*"] },
    "team",
  );
  const ws = compile(short, long);
  const a = decide(job("x-1", "team", "succeeded"), ws);
  assert.equal(a.action === "delete" && a.ttlSeconds, 60);
  assert.equal(a.action === "delete" && a.decidedBy.name, "long");
  const b = decide(job("x-2", "team", "failed"), ws);
  assert.equal(
    b.action === "delete" && b.ttlSeconds,
    100,
    "per outcome: the failed TTL of `short` is longer",
  );
  assert.equal(b.action === "delete" && b.decidedBy.name, "short");
  const c = decide(job("y-1", "team", "succeeded"), ws);
  assert.equal(c.action === "delete" && c.ttlSeconds, 10, "only `short` covers y-1");
  const keepAll = compile(short, watcher("forever", { ttlSecondsAfterFailed: 1 }));
  assert.deepEqual(decide(job("z", "team", "succeeded"), keepAll), { action: "keep", why: "no-ttl" });
});

test("merge across kinds: a JobWatcher can keep its namespace's Jobs longer than a ClusterJobWatcher", () => {
  const ws = compile(
    watcher("all", { ttlSecondsAfterSucceeded: 5 }),
    watcher("mine", { ttlSecondsAfterSucceeded: 500 }, "team"),
  );
  const d = decide(job("j", "team", "succeeded"), ws);
  assert.equal(d.action === "delete" && d.ttlSeconds, 500);
  const elsewhere = decide(job("j", "other", "succeeded"), ws);
  assert.equal(elsewhere.action === "delete" && elsewhere.ttlSeconds, 5);
});

test("an invalid watcher deletes nothing and holds back deletions in its reach only", () => {
  // Built directly: the API server would refuse this spec.
  const broken = watcher("broken", { ttlSecondsAfterSucceeded: 1, jobNamePatterns: ["("] }, "team");
  const fine = watcher("fine", { ttlSecondsAfterSucceeded: 1 });
  const ws = compile(broken, fine);
  assert.equal(compileWatcher(broken).errors.length, 1);
  const held = decide(job("a", "team", "succeeded"), ws);
  assert.equal(held.action, "keep");
  assert.equal(held.action === "keep" && held.heldBy?.name, "broken");
  assert.equal(decide(job("a", "other", "succeeded"), ws).action, "delete");
});

test("finished(): Complete or Failed only; intermediate conditions are not the end", () => {
  const j = job("a", "n", "running") as Job;
  const withCond = (type: string) =>
    ({
      ...j,
      status: { conditions: [{ type, status: "True", lastTransitionTime: "2026-01-01T00:00:05Z" }] },
    }) as DeepReadonly<Job>;
  assert.equal(finished(withCond("SuccessCriteriaMet")), undefined);
  assert.equal(finished(withCond("FailureTarget")), undefined);
  assert.deepEqual(finished(withCond("Complete")), { outcome: "succeeded", at: T0 + 5000 });
  assert.deepEqual(finished(withCond("Failed")), { outcome: "failed", at: T0 + 5000 });
});

test("validateJobWatcherSpec names each bad field and says what is wrong", () => {
  assert.deepEqual(
    validateJobWatcherSpec({ checkIntervalSeconds: 60, jobNamePatterns: ["ok-.*", "a++", "(x"] }),
    [
      {
        path: "spec.jobNamePatterns[1]",
        message:
          "is not a valid RE2 regular expression: error parsing regexp: invalid nested repetition operator: `++`",
      },
      {
        path: "spec.jobNamePatterns[2]",
        message: "is not a valid RE2 regular expression: error parsing regexp: missing closing ): `(x`",
      },
    ],
  );
  const errs = validateJobWatcherSpec({
    checkIntervalSeconds: 1,
    ttlSecondsAfterFailed: -1,
    namespacePatterns: ["(?P<n>x)", ""],
  });
  const paths = errs.map((e) => e.path).sort();
  assert.deepEqual(paths, [
    "spec.checkIntervalSeconds",
    "spec.namespacePatterns[0]",
    "spec.namespacePatterns[1]",
    "spec.ttlSecondsAfterFailed",
  ]);
  assert.match(errs.find((e) => e.path === "spec.namespacePatterns[0]")?.message ?? "", /named groups/);
  assert.deepEqual(validateJobWatcherSpec({ checkIntervalSeconds: 300 }), []);
  assert.ok(
    validateJobWatcherSpec({ checkIntervalSeconds: 300, jobNamePatterns: Array(33).fill("a") }).some(
      (e) => e.path === "spec.jobNamePatterns",
    ),
  );
});

test("hostile patterns are matched in linear time", () => {
  // Catastrophic for a backtracking engine: (a+)+$ against "aaaa…!" takes exponential time in V8's RegExp.
  const w = compileWatcher(
    watcher("evil", { ttlSecondsAfterSucceeded: 1, jobNamePatterns: ["(a+)+b", "(a|aa)+c"] }, "team"),
  );
  const name = `${"a".repeat(5000)}!`;
  const start = process.hrtime.bigint();
  const d = decide(job(name, "team", "succeeded"), [w]);
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  assert.equal(d.action, "keep");
  assert.ok(ms < 500, `matching took ${ms} ms`);
});
