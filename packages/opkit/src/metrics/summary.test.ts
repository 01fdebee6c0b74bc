import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../clock/index.ts";
import { WorkQueue } from "../queue/workqueue.ts";
import { Metrics, histogramQuantile, parseExposition, summarizeOperator } from "./index.ts";

test("histogramQuantile interpolates inside the bucket, as Prometheus does", () => {
  const b = [
    { le: 0.1, count: 50 },
    { le: 0.2, count: 90 },
    { le: 0.4, count: 100 },
    { le: Infinity, count: 100 },
  ];
  assert.equal(histogramQuantile(0.5, b), 0.1);
  assert.ok(Math.abs(histogramQuantile(0.7, b)! - 0.15) < 1e-9);
  assert.ok(Math.abs(histogramQuantile(0.99, b)! - 0.38) < 1e-9);
  assert.equal(histogramQuantile(0.5, [{ le: Infinity, count: 0 }]), undefined);
  // Everything above the largest finite bucket: that bucket's bound, not Infinity.
  assert.equal(
    histogramQuantile(0.5, [
      { le: 1, count: 0 },
      { le: Infinity, count: 3 },
    ]),
    1,
  );
});

test("two scrapes of a real registry give rates by result, interval latency, queue and informers", async () => {
  const clock = new FakeClock();
  const m = new Metrics({ clock, processMetrics: false });
  const r = m.reconcile("memcached", { maxConcurrentReconciles: 2 });
  const q = new WorkQueue<string>({ clock, metrics: m.queueMetrics("memcached") });
  m.trackQueue("memcached", q);
  m.trackInformers(() => [
    { kind: "apps/v1/Deployment", synced: true, objects: 3, watchRequests: 2, relists: 0 },
  ]);
  m.leaderStatus("memcached-operator")(true);
  // Before: 10 slow reconciles (2 s each).
  for (let i = 0; i < 10; i++) {
    const t = r.start();
    clock.advance(2000);
    t.end("success");
  }
  const before = parseExposition(await m.text());
  // During a 2 s interval: 4 fast successes, 2 errors, 2 requeues; 6 adds; one reconcile still running.
  for (let i = 0; i < 4; i++) {
    const t = r.start();
    clock.advance(10);
    t.end("success");
  }
  for (const outcome of ["error", "error", "requeue", "requeue_after"] as const) r.start().end(outcome);
  for (let i = 0; i < 6; i++) q.add(`k${i}`);
  r.start();
  const after = parseExposition(await m.text());

  const s = summarizeOperator(after, before, 2);
  assert.equal(s.controllers.length, 1);
  const c = s.controllers[0]!;
  assert.equal(c.name, "memcached");
  assert.equal(c.depth, 6);
  assert.equal(c.addsPerSecond, 3);
  assert.equal(c.reconcilesPerSecond?.success, 2);
  assert.equal(c.errorsPerSecond, 1);
  assert.equal(c.requeuesPerSecond, 1);
  assert.equal(c.reconcilesTotal.success, 14);
  assert.equal(c.activeWorkers, 1);
  assert.equal(c.maxWorkers, 2);
  // The interval's reconciles were fast: the 2 s ones before it do not count.
  assert.ok(c.p50Seconds !== undefined && c.p50Seconds <= 0.01, `p50 ${c.p50Seconds}`);
  assert.deepEqual(s.informers, [
    { kind: "apps/v1/Deployment", namespace: "", objects: 3, synced: true, watchRestarts: 1, relists: 0 },
  ]);
  assert.deepEqual(s.leases, { "memcached-operator": true });

  // One scrape: totals and all-time latency, no rates.
  const once = summarizeOperator(after);
  assert.equal(once.controllers[0]?.reconcilesPerSecond, undefined);
  assert.ok((once.controllers[0]?.p50Seconds ?? 0) > 1, "all-time p50 is dominated by the 2 s reconciles");
});

test("a Go operator's controller-runtime metrics read the same; no informer panel", () => {
  // The shape client_golang serves for a controller-runtime operator (labels in Go's order).
  const text = `# TYPE controller_runtime_reconcile_total counter
controller_runtime_reconcile_total{controller="appservice",result="error"} 0
controller_runtime_reconcile_total{controller="appservice",result="success"} 42
controller_runtime_active_workers{controller="appservice"} 0
controller_runtime_max_concurrent_reconciles{controller="appservice"} 1
controller_runtime_reconcile_time_seconds_bucket{controller="appservice",le="0.005"} 40
controller_runtime_reconcile_time_seconds_bucket{controller="appservice",le="0.01"} 42
controller_runtime_reconcile_time_seconds_bucket{controller="appservice",le="+Inf"} 42
workqueue_depth{controller="appservice",name="appservice"} 0
leader_election_master_status{name="appservice-lock"} 1
`;
  const s = summarizeOperator(parseExposition(text));
  assert.equal(s.controllers[0]?.reconcilesTotal.success, 42);
  assert.ok((s.controllers[0]?.p99Seconds ?? 0) > 0.005);
  assert.deepEqual(s.informers, []);
  assert.deepEqual(s.leases, { "appservice-lock": true });
});

test("a counter that went down (the operator restarted) counts from zero, not negative", async () => {
  const a = parseExposition('controller_runtime_reconcile_total{controller="c",result="success"} 100\n');
  const b = parseExposition('controller_runtime_reconcile_total{controller="c",result="success"} 4\n');
  assert.equal(summarizeOperator(b, a, 2).controllers[0]?.reconcilesPerSecond?.success, 2);
});
