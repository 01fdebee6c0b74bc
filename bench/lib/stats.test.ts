import assert from "node:assert/strict";
import { test } from "node:test";
import {
  figure,
  markdownTable,
  median,
  percentile,
  reconcileWaits,
  dueBy,
  missingIndexes,
  bindRate,
  ratio,
  selectFigures,
  sumMetric,
  verdict,
} from "./stats.ts";

test("median of odd and even counts, NaN when empty", () => {
  assert.equal(median([3, 1, 2]), 2);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.ok(Number.isNaN(median([])));
});

test("percentile by nearest rank", () => {
  const v = Array.from({ length: 100 }, (_, i) => i + 1);
  assert.equal(percentile(v, 50), 50);
  assert.equal(percentile(v, 99), 99);
  assert.equal(percentile([7], 99), 7);
});

test("ratio is opkit ÷ peer and undefined without a usable peer", () => {
  assert.equal(ratio(3, 2), 1.5);
  assert.equal(ratio(3, 0), undefined);
  assert.equal(ratio(3, undefined), undefined);
});

test("verdict compares the ratio or the value with the bound", () => {
  assert.equal(verdict(5, 0.9, { on: "ratio", kind: "max", bound: 1 }), "pass");
  assert.equal(verdict(5, 1.1, { on: "ratio", kind: "max", bound: 1 }), "fail");
  assert.equal(verdict(5, undefined, { on: "ratio", kind: "max", bound: 1 }), "n/a");
  assert.equal(verdict(2e6, undefined, { on: "value", kind: "min", bound: 1e6 }), "pass");
  assert.equal(verdict(5e5, undefined, { on: "value", kind: "min", bound: 1e6 }), "fail");
});

test("figure: medians of both sides, the ratio and the JSON shape of latest.json", () => {
  const f = figure({
    name: "converge.wall",
    unit: "s",
    opkit: [10, 30, 20],
    peer: [10, 11],
    target: { on: "ratio", kind: "max", bound: 1 },
    parameters: { n: 1000 },
  });
  assert.deepEqual(JSON.parse(JSON.stringify(f)), {
    name: "converge.wall",
    value: 20,
    unit: "s",
    peer: "controller-runtime",
    peerValue: 10.5,
    ratio: 20 / 10.5,
    target: { on: "ratio", kind: "max", bound: 1 },
    verdict: "fail",
    runs: { opkit: [10, 30, 20], peer: [10, 11] },
    parameters: { n: 1000 },
  });
  const alone = figure({ name: "queue", unit: "ops/s", opkit: [2e6] });
  assert.equal(alone.peerValue, undefined);
  assert.equal(alone.verdict, "n/a");
});

test("markdownTable prints one row per figure with the ratio", () => {
  const t = markdownTable([figure({ name: "x", unit: "s", opkit: [2], peer: [1] })]);
  const lines = t.split("\n");
  assert.equal(lines.length, 3);
  assert.match(lines[2]!, /^\| x \| 2 s \| 1 s \(controller-runtime\) \| 2\.000× \|/);
});

test("sumMetric adds the samples whose labels match", () => {
  const text = [
    "# HELP rest_client_requests_total x",
    'rest_client_requests_total{code="200",host="h",method="GET"} 10',
    'rest_client_requests_total{code="201",host="h",method="POST"} 3',
    'rest_client_requests_total{code="200",host="h",method="PATCH"} 4',
    'rest_client_requests_total_other{method="PATCH"} 100',
  ].join("\n");
  assert.equal(sumMetric(text, "rest_client_requests_total"), 17);
  assert.equal(sumMetric(text, "rest_client_requests_total", { method: ["POST", "PATCH", "PUT"] }), 7);
  assert.equal(sumMetric(text, "rest_client_requests_total", { method: "GET" }), 10);
});

test("selectFigures keeps the known order and rejects unknown names", () => {
  const known = ["converge", "queue", "decode"];
  assert.deepEqual(selectFigures("", known), known);
  assert.deepEqual(selectFigures("decode, queue", known), ["queue", "decode"]);
  assert.throws(() => selectFigures("nope", known), /unknown figure nope/);
});

test("reconcileWaits reads the Go peer's and opkit's lines, only those started since the mark", () => {
  const lines = [
    '{"event":"reconcile","key":"ns/a","tsNs":2000000000,"queuedUs":1500}',
    '{"event":"reconcile","key":"ns/a","tsNs":999000000,"queuedUs":900}', // before the mark
    '{"event":"reconcile","key":"ns/b","tsNs":3000000000,"queuedUs":-1}', // no event queued it
    '{"level":"debug","msg":"reconcile done","startedAt":1500,"queuedMs":2.25}',
    '{"level":"debug","msg":"reconcile done","startedAt":1500}', // debug line without a wait
    '{"level":"info","msg":"reconcile done"', // truncated
    '{"event":"ready"}',
  ];
  assert.deepEqual(reconcileWaits(lines, 1000), [1.5, 2.25]);
  assert.deepEqual(reconcileWaits(lines, 0), [1.5, 0.9, 2.25]);
});

test("dueBy paces a steady rate and catches up after a late tick", () => {
  assert.equal(dueBy(0, 200, 1000), 1);
  assert.equal(dueBy(4.9, 200, 1000), 1);
  assert.equal(dueBy(5, 200, 1000), 2);
  assert.equal(dueBy(1000, 200, 1000), 201);
  assert.equal(dueBy(60_000, 200, 1000), 1000);
});

test("missingIndexes lists what is still to create, ignoring other names", () => {
  assert.deepEqual(missingIndexes(["svc-0", "svc-2", "other", "svc-9"], 4, "svc-"), [1, 3]);
  assert.deepEqual(missingIndexes([], 3, "p-"), [0, 1, 2]);
  assert.deepEqual(missingIndexes(["p-0", "p-1"], 2, "p-"), []);
});

test("bindRate is the pace from the first to the last event, NaN without a span", () => {
  assert.equal(bindRate([1000, 1500, 3000]), 1); // 2 intervals over 2 s
  assert.equal(bindRate([3000, 1000, 2000, 2000, 1500]), 2); // unordered: 4 intervals over 2 s
  assert.ok(Number.isNaN(bindRate([5])));
  assert.ok(Number.isNaN(bindRate([5, 5])));
});
