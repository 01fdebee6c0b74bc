import { test } from "node:test";
import assert from "node:assert/strict";
import type { OperatorSummary } from "opkit";
import { renderTop } from "./render.ts";

const summary: OperatorSummary = {
  controllers: [
    {
      name: "a-controller-with-a-very-long-name",
      depth: 123456,
      addsPerSecond: 12345.6,
      reconcilesPerSecond: { success: 99999, error: 1 },
      errorsPerSecond: 1,
      requeuesPerSecond: 0,
      reconcilesTotal: { success: 5 },
      errorsTotal: 0,
      p50Seconds: 0.0042,
      p99Seconds: 61,
      activeWorkers: 16,
      maxWorkers: 16,
      longestRunningSeconds: 3725,
    },
  ],
  informers: [
    {
      kind: "apiextensions.k8s.io/v1/CustomResourceDefinition",
      namespace: "a-very-long-namespace-name",
      objects: 1234567,
      synced: true,
      watchRestarts: 3,
      relists: 1,
    },
  ],
  leases: { "memcached-operator": true },
  requestsPerSecond: 3.25,
  failedRequestsPerSecond: 0,
  residentBytes: 120 * 2 ** 20,
};

test("every line fits 80 columns, long names and big figures included", () => {
  const screen = renderTop(summary, {
    source: "http://127.0.0.1:8080/metrics",
    intervalSeconds: 1,
    at: new Date(0),
  });
  for (const line of screen.split("\n")) assert.ok(line.length <= 80, `${line.length}: ${line}`);
  assert.match(screen, /^a-controller-w… +123456 +12k +100k/m);
  assert.match(screen, /LEADER \(memcached-operator\)/);
  assert.match(screen, /RSS 120 MiB/);
  assert.match(screen, /62m5s/);
});

test("before the first scrape and after a failed one the screen says so", () => {
  const screen = renderTop(undefined, {
    source: "x",
    intervalSeconds: 1,
    at: new Date(0),
    error: "scraping x: HTTP 503",
  });
  assert.match(screen, /^! scraping x: HTTP 503$/m);
  assert.match(screen, /\(no controller metrics yet\)/);
  assert.match(screen, /leader election off/);
});
