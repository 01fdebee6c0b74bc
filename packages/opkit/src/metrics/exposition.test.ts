import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { FakeClock } from "../clock/index.ts";
import { ExpositionParseError, Metrics, ScrapeError, parseExposition, scrape } from "./index.ts";

test("parses prom-client's own exposition: counters, gauges and histogram buckets with labels", async () => {
  const clock = new FakeClock();
  const m = new Metrics({ clock, processMetrics: false });
  const r = m.reconcile("web", { maxConcurrentReconciles: 2 });
  const t = r.start();
  clock.advance(30);
  t.end("success");
  const samples = parseExposition(await m.text());
  const find = (name: string, labels: Record<string, string>) =>
    samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  assert.equal(
    find("controller_runtime_reconcile_total", { controller: "web", result: "success" })?.value,
    1,
  );
  assert.equal(find("controller_runtime_max_concurrent_reconciles", { controller: "web" })?.value, 2);
  assert.equal(
    find("controller_runtime_reconcile_time_seconds_bucket", { controller: "web", le: "+Inf" })?.value,
    1,
  );
  assert.equal(
    find("controller_runtime_reconcile_time_seconds_bucket", { controller: "web", le: "0.025" })?.value,
    0,
  );
  assert.equal(
    find("controller_runtime_reconcile_time_seconds_bucket", { controller: "web", le: "0.05" })?.value,
    1,
  );
});

test("label escapes, special values, timestamps and Go's spacing", () => {
  const text = [
    "# HELP x a metric",
    "# TYPE x gauge",
    'x{a="q\\"uote",b="back\\\\slash",c="new\\nline",} 1.5e3 1700000000000',
    "y +Inf",
    "z{} NaN",
    'w{ le="x" } 2',
    // prom-client writes NaN as "Nan"; Prometheus reads values case-insensitively.
    "v Nan",
    "u -inf",
    "",
  ].join("\n");
  const [x, y, z, w, v, u] = parseExposition(text);
  assert.ok(Number.isNaN(v?.value));
  assert.equal(u?.value, -Infinity);
  assert.deepEqual(x, { name: "x", labels: { a: 'q"uote', b: "back\\slash", c: "new\nline" }, value: 1500 });
  assert.equal(y?.value, Infinity);
  assert.ok(Number.isNaN(z?.value));
  assert.deepEqual(w, { name: "w", labels: { le: "x" }, value: 2 });
});

test("text that is not metrics fails naming the line", () => {
  assert.throws(
    () => parseExposition("ok 1\n<html><body>502</body></html>"),
    (err: unknown) => {
      assert.ok(err instanceof ExpositionParseError);
      assert.equal(err.line, 2);
      return true;
    },
  );
  assert.throws(() => parseExposition('m{a="open 1'), /line 1: unterminated value of label a/);
  assert.throws(() => parseExposition("m one"), /value "one" is not a number/);
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<{ url: string; server: Server }> {
  const server = createServer(handler);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`, server };
}

test("scrape: reads an endpoint; an error status, a hang and a refused connection are ScrapeErrors", async (t) => {
  const ok = await serve((_req, res) => res.end("up 1\n"));
  t.after(() => ok.server.close());
  assert.deepEqual(await scrape(ok.url), [{ name: "up", labels: {}, value: 1 }]);

  const failing = await serve((_req, res) => {
    res.statusCode = 503;
    res.end("no");
  });
  t.after(() => failing.server.close());
  await assert.rejects(
    scrape(failing.url),
    (err: unknown) => err instanceof ScrapeError && /HTTP 503/.test(err.message),
  );

  const hung = await serve(() => {
    /* never answers */
  });
  t.after(() => hung.server.closeAllConnections());
  t.after(() => hung.server.close());
  await assert.rejects(scrape(hung.url, { timeoutMs: 200 }), /no answer within the timeout/);

  const port = (failing.server.address() as AddressInfo).port;
  await new Promise<void>((r) => failing.server.close(() => r()));
  await assert.rejects(scrape(`http://127.0.0.1:${port}/metrics`), ScrapeError);
});
