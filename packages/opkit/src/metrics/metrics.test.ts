import { test } from "node:test";
import assert from "node:assert/strict";
import { FakeClock } from "../clock/index.ts";
import { WorkQueue } from "../queue/workqueue.ts";
import { Metrics } from "./index.ts";

/** The value of one exposition line, e.g. `name{a="b"}`; undefined when the series is absent. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split("\n")) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

test("reconcile outcomes map to controller-runtime's counters, histogram and active workers", async () => {
  const clock = new FakeClock();
  const m = new Metrics({ clock, processMetrics: false });
  const r = m.reconcile("c", { maxConcurrentReconciles: 4 });

  const before = await m.text();
  // Every series exists at zero before the first reconcile.
  for (const result of ["success", "error", "requeue", "requeue_after"]) {
    assert.equal(sample(before, `controller_runtime_reconcile_total{controller="c",result="${result}"}`), 0);
  }
  assert.equal(sample(before, 'controller_runtime_max_concurrent_reconciles{controller="c"}'), 4);

  const a = r.start();
  const b = r.start();
  assert.equal(sample(await m.text(), 'controller_runtime_active_workers{controller="c"}'), 2);
  clock.advance(300);
  a.end("success");
  a.end("success"); // a second end is ignored
  b.end("success");
  for (const outcome of ["error", "requeue", "requeue_after", "terminal", "panic"] as const) {
    r.start().end(outcome);
  }

  const text = await m.text();
  const c = (name: string, extra = ""): number | undefined => sample(text, `${name}{controller="c"${extra}}`);
  assert.equal(c("controller_runtime_reconcile_total", ',result="success"'), 2);
  assert.equal(c("controller_runtime_reconcile_total", ',result="requeue"'), 1);
  assert.equal(c("controller_runtime_reconcile_total", ',result="requeue_after"'), 1);
  // error, terminal and panic are all errors.
  assert.equal(c("controller_runtime_reconcile_total", ',result="error"'), 3);
  assert.equal(c("controller_runtime_reconcile_errors_total"), 3);
  assert.equal(c("controller_runtime_terminal_reconcile_errors_total"), 1);
  assert.equal(c("controller_runtime_reconcile_panics_total"), 1);
  assert.equal(c("controller_runtime_active_workers"), 0);
  assert.equal(c("controller_runtime_reconcile_time_seconds_count"), 7);
  assert.equal(c("controller_runtime_reconcile_time_seconds_sum"), 0.6);
  const bucket = (le: string): number | undefined =>
    sample(text, `controller_runtime_reconcile_time_seconds_bucket{le="${le}",controller="c"}`);
  assert.equal(bucket("0.25"), 5);
  assert.equal(bucket("0.3"), 7);
});

test("workqueue metrics follow a real queue, including the scrape-time gauges", async () => {
  const clock = new FakeClock();
  const m = new Metrics({ processMetrics: false });
  const q = new WorkQueue<string>({ clock, metrics: m.queueMetrics("c") });
  const untrack = m.trackQueue("c", q);
  const l = '{name="c",controller="c"}';
  const bucket = (name: string, le: string): string => `${name}_bucket{le="${le}",name="c",controller="c"}`;

  q.add("ns/a");
  q.add("ns/b");
  q.add("ns/a"); // coalesced: not an add
  q.addAfter("ns/c", 1000);
  let text = await m.text();
  assert.equal(sample(text, `workqueue_depth${l}`), 2);
  assert.equal(sample(text, `workqueue_adds_total${l}`), 2);
  assert.equal(sample(text, `workqueue_retries_total${l}`), 1);

  clock.advance(2000); // ns/a and ns/b waited 2 s; ns/c becomes ready
  const item = await q.get();
  assert.equal(item?.key, "ns/a");
  clock.advance(5000);
  text = await m.text();
  assert.equal(sample(text, `workqueue_depth${l}`), 2);
  assert.equal(sample(text, `workqueue_adds_total${l}`), 3);
  assert.equal(sample(text, `workqueue_unfinished_work_seconds${l}`), 5);
  assert.equal(sample(text, `workqueue_longest_running_processor_seconds${l}`), 5);
  assert.equal(sample(text, bucket("workqueue_queue_duration_seconds", "1")), 0);
  assert.equal(sample(text, bucket("workqueue_queue_duration_seconds", "10")), 1);

  q.done("ns/a");
  text = await m.text();
  assert.equal(sample(text, `workqueue_work_duration_seconds_sum${l}`), 5);
  assert.equal(sample(text, `workqueue_work_duration_seconds_count${l}`), 1);
  assert.equal(sample(text, `workqueue_longest_running_processor_seconds${l}`), 0);

  untrack();
  text = await m.text();
  assert.equal(sample(text, `workqueue_unfinished_work_seconds${l}`), undefined);
  q.shutDown();
});

test("client requests are counted by code, method and host; watches stay out of the latency histogram", async () => {
  const m = new Metrics({ processMetrics: false });
  const hook = m.onRequest("10.0.0.1:6443");
  hook({ method: "GET", path: "/api/v1/pods", watch: false, code: 200, durationMs: 20 });
  hook({ method: "GET", path: "/api/v1/pods", watch: false, code: 200, durationMs: 40 });
  hook({ method: "PUT", path: "/api/v1/x", watch: false, code: 409, durationMs: 10 });
  hook({ method: "GET", path: "/api/v1/pods", watch: true, code: 200, durationMs: 300_000 });
  hook({ method: "GET", path: "/api/v1/pods", watch: false, code: 0, durationMs: 1 });

  const text = await m.text();
  const h = 'host="10.0.0.1:6443"';
  assert.equal(sample(text, `rest_client_requests_total{code="200",method="GET",${h}}`), 3);
  assert.equal(sample(text, `rest_client_requests_total{code="409",method="PUT",${h}}`), 1);
  assert.equal(sample(text, `rest_client_requests_total{code="<error>",method="GET",${h}}`), 1);
  assert.equal(sample(text, `rest_client_request_duration_seconds_count{verb="GET",${h}}`), 3);
  assert.equal(sample(text, `rest_client_request_duration_seconds_sum{verb="GET",${h}}`), 0.061);
});

test("leader status gauge and process metrics", async () => {
  const m = new Metrics();
  const set = m.leaderStatus("my-operator");
  let text = await m.text();
  assert.equal(sample(text, 'leader_election_master_status{name="my-operator"}'), 0);
  set(true);
  text = await m.text();
  assert.equal(sample(text, 'leader_election_master_status{name="my-operator"}'), 1);
  assert.match(text, /^process_cpu_user_seconds_total \d/m);
  assert.match(text, /^nodejs_heap_size_used_bytes \d/m);
  // Our own registry: the global one stays empty, so another user of prom-client cannot collide.
  const { register } = await import("prom-client");
  assert.equal(register.getSingleMetric("controller_runtime_reconcile_total"), undefined);
});

test("a user's own prom-client metrics register in the operator's registry, and the event loop lag is sampled as lag", async () => {
  const m = new Metrics();
  // prom-client's index gives the classes opkit loads file by file: one module, so they mix.
  const { Counter, Histogram } = await import("prom-client");
  const mine = new Counter({
    name: "my_things_total",
    help: "things",
    labelNames: ["kind"],
    registers: [m.registry],
  });
  mine.inc({ kind: "a" }, 2);
  new Histogram({ name: "my_seconds", help: "seconds", buckets: [1], registers: [m.registry] }).observe(0.5);
  const text = await m.text();
  assert.equal(sample(text, 'my_things_total{kind="a"}'), 2);
  assert.equal(sample(text, 'my_seconds_bucket{le="1"}'), 1);
  // The event loop is sampled every 100 ms, and the gauges report lag, not the sampling interval: an idle
  // loop is late by well under 100 ms (prom-client's own gauges read ~0.1 s at this rate).
  await new Promise((r) => setTimeout(r, 350));
  const later = await m.text();
  for (const q of ["p50", "p99", "max", "mean"]) {
    const v = sample(later, `nodejs_eventloop_lag_${q}_seconds`);
    assert.ok(v !== undefined && v >= 0 && v < 0.05, `nodejs_eventloop_lag_${q}_seconds = ${v}`);
  }
  assert.equal(later.match(/^nodejs_eventloop_lag_p99_seconds /gm)?.length, 1, "registered once");
  await new Promise((r) => setImmediate(r));
  assert.ok((sample(await m.text(), "nodejs_eventloop_lag_seconds") ?? -1) >= 0);
});

test("informer metrics are read from their source at each scrape; an untracked source's series vanish", async () => {
  const m = new Metrics({ processMetrics: false });
  const informers = [
    { kind: "v1/Pod", synced: true, objects: 12, watchRequests: 1, relists: 0 },
    { kind: "apps/v1/Deployment", namespace: "a", synced: false, objects: 0, watchRequests: 4, relists: 2 },
  ];
  const untrack = m.trackInformers(() => informers);
  let text = await m.text();
  assert.equal(sample(text, 'opkit_informer_objects{kind="v1/Pod",namespace=""}'), 12);
  assert.equal(sample(text, 'opkit_informer_synced{kind="v1/Pod",namespace=""}'), 1);
  assert.equal(sample(text, 'opkit_informer_watch_restarts_total{kind="v1/Pod",namespace=""}'), 0);
  assert.equal(sample(text, 'opkit_informer_synced{kind="apps/v1/Deployment",namespace="a"}'), 0);
  // The first watch is not a restart.
  assert.equal(
    sample(text, 'opkit_informer_watch_restarts_total{kind="apps/v1/Deployment",namespace="a"}'),
    3,
  );
  assert.equal(sample(text, 'opkit_informer_relists_total{kind="apps/v1/Deployment",namespace="a"}'), 2);

  informers[0]!.objects = 13;
  informers[0]!.watchRequests = 3;
  text = await m.text();
  assert.equal(sample(text, 'opkit_informer_objects{kind="v1/Pod",namespace=""}'), 13);
  assert.equal(sample(text, 'opkit_informer_watch_restarts_total{kind="v1/Pod",namespace=""}'), 2);

  untrack();
  text = await m.text();
  assert.equal(sample(text, 'opkit_informer_objects{kind="v1/Pod",namespace=""}'), undefined);
});
