import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { NotFoundError } from "../client/errors.ts";
import type { KubeObject } from "../client/types.ts";
import { FakeClock } from "../clock/index.ts";
import { microTime } from "../client/types.ts";
import { EventRecorder, type EventSeries, type EventSink, type EventV1 } from "./recorder.ts";

/** Records what the recorder would send to the API server, and can be told to fail. */
class FakeSink implements EventSink {
  readonly created: EventV1[] = [];
  readonly patches: { namespace: string; name: string; series: EventSeries }[] = [];
  failCreate: Error | undefined;
  failPatch: Error | undefined;

  async create(event: EventV1): Promise<EventV1> {
    if (this.failCreate) throw this.failCreate;
    this.created.push(structuredClone(event));
    return event;
  }

  async patchSeries(namespace: string, name: string, series: EventSeries): Promise<EventV1> {
    if (this.failPatch) throw this.failPatch;
    this.patches.push({ namespace, name, series: { ...series } });
    const ev = this.created.find((e) => e.metadata.name === name);
    assert.ok(ev, `patch of unknown event ${name}`);
    return { ...ev, series };
  }
}

const pod = (name: string, uid: string, ns = "ns"): KubeObject => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name, namespace: ns, uid, resourceVersion: "7" },
});
const WALL = new Date("2026-03-04T05:06:07.891Z");

function setup(opts: { burst?: number; refillIntervalMs?: number } = {}) {
  const sink = new FakeSink();
  const clock = new FakeClock();
  const errors: unknown[] = [];
  const recorder = new EventRecorder(sink, {
    reportingController: "opkit.dev/test",
    reportingInstance: "test-1",
    clock,
    now: () => WALL,
    onError: (err) => errors.push(err),
    ...opts,
  });
  return { sink, clock, errors, recorder };
}

const failed = { type: "Warning", reason: "Failed", action: "Reconcile", note: "boom" } as const;

describe("EventRecorder", () => {
  it("writes an events.k8s.io/v1 Event about the object", async () => {
    const { sink, recorder } = setup();
    await recorder.record(pod("p", "u1"), failed);
    assert.equal(sink.created.length, 1);
    const ev = sink.created[0];
    assert.ok(ev);
    assert.equal(ev.apiVersion, "events.k8s.io/v1");
    assert.equal(ev.kind, "Event");
    assert.equal(ev.metadata.namespace, "ns");
    assert.match(ev.metadata.name ?? "", /^p\.[0-9a-f]+$/);
    assert.equal(ev.eventTime, "2026-03-04T05:06:07.891000Z");
    assert.deepEqual(ev.regarding, {
      apiVersion: "v1",
      kind: "Pod",
      name: "p",
      namespace: "ns",
      uid: "u1",
      resourceVersion: "7",
    });
    assert.equal(ev.reportingController, "opkit.dev/test");
    assert.equal(ev.reportingInstance, "test-1");
    assert.equal(ev.type, "Warning");
    assert.equal(ev.reason, "Failed");
    assert.equal(ev.action, "Reconcile");
    assert.equal(ev.note, "boom");
    assert.equal(ev.series, undefined);
  });

  it("puts events about cluster-scoped objects in the default namespace", async () => {
    const { sink, recorder } = setup();
    await recorder.record({ apiVersion: "v1", kind: "Node", metadata: { name: "n1", uid: "n" } }, failed);
    assert.equal(sink.created[0]?.metadata.namespace, "default");
  });

  it("turns repeats within the window into a series on the first Event", async () => {
    const { sink, clock, recorder } = setup();
    for (let i = 0; i < 5; i++) {
      await recorder.record(pod("p", "u1"), failed);
      clock.advance(30_000);
    }
    assert.equal(sink.created.length, 1);
    const name = sink.created[0]?.metadata.name;
    assert.deepEqual(
      sink.patches.map((p) => [p.name, p.series.count]),
      [
        [name, 2],
        [name, 3],
        [name, 4],
        [name, 5],
      ],
    );
    assert.equal(sink.patches[0]?.series.lastObservedTime, microTime(WALL));
    assert.deepEqual(recorder.stats, { created: 1, patched: 4, dropped: 0, failed: 0 });
  });

  it("keeps series apart by object, type, reason, action and note", async () => {
    const { sink, recorder } = setup();
    await recorder.record(pod("p", "u1"), failed);
    await recorder.record(pod("p", "u2"), failed);
    await recorder.record(pod("p", "u1"), { ...failed, type: "Normal" });
    await recorder.record(pod("p", "u1"), { ...failed, reason: "Other" });
    await recorder.record(pod("p", "u1"), { ...failed, action: "Delete" });
    await recorder.record(pod("p", "u1"), { ...failed, note: "different" });
    assert.equal(sink.created.length, 6);
    assert.equal(sink.patches.length, 0);
    assert.equal(new Set(sink.created.map((e) => e.metadata.name)).size, 6, "names are unique");
  });

  it("starts a new Event once the series has been quiet longer than the window", async () => {
    const { sink, clock, recorder } = setup();
    await recorder.record(pod("p", "u1"), failed);
    clock.advance(5 * 60_000);
    await recorder.record(pod("p", "u1"), failed);
    clock.advance(6 * 60_000 + 1);
    await recorder.record(pod("p", "u1"), failed);
    assert.equal(sink.created.length, 2);
    assert.equal(sink.patches.length, 1);
  });

  it("rate-limits per object: burst 25, then one per 5 minutes, dropping quietly", async () => {
    const { sink, clock, errors, recorder } = setup();
    for (let i = 0; i < 40; i++) await recorder.record(pod("p", "u1"), { ...failed, note: `n${i}` });
    assert.equal(sink.created.length, 25);
    assert.equal(recorder.stats.dropped, 15);
    assert.equal(errors.length, 0, "drops are not errors");
    await recorder.record(pod("q", "u2"), failed);
    assert.equal(sink.created.length, 26, "another object has its own bucket");
    clock.advance(4 * 60_000);
    await recorder.record(pod("p", "u1"), { ...failed, note: "later" });
    assert.equal(sink.created.length, 26, "no token yet after 4 minutes");
    clock.advance(60_000);
    await recorder.record(pod("p", "u1"), { ...failed, note: "later" });
    assert.equal(sink.created.length, 27, "one token after 5 minutes");
    await recorder.record(pod("p", "u1"), { ...failed, note: "later2" });
    assert.equal(sink.created.length, 27);
  });

  it("honours a configured burst and refill", async () => {
    const { sink, clock, recorder } = setup({ burst: 2, refillIntervalMs: 1000 });
    for (let i = 0; i < 4; i++) await recorder.record(pod("p", "u1"), failed);
    assert.equal(sink.created.length + sink.patches.length, 2);
    clock.advance(1000);
    await recorder.record(pod("p", "u1"), failed);
    assert.equal(sink.patches.length, 2);
    assert.equal(sink.patches[1]?.series.count, 3, "dropped repeats are not counted");
  });

  it("reports write errors to onError and never rejects", async () => {
    const { sink, errors, recorder } = setup();
    sink.failCreate = new Error("apiserver down");
    await recorder.record(pod("p", "u1"), failed);
    assert.equal(errors.length, 1);
    assert.equal(recorder.stats.failed, 1);
    sink.failCreate = undefined;
    await recorder.record(pod("p", "u1"), failed);
    assert.equal(sink.created.length, 1);
    assert.equal(sink.created[0]?.series?.count, 2, "the repeat after a failed create carries the count");
  });

  it("creates a new Event when the series' Event expired on the server", async () => {
    const { sink, recorder } = setup();
    await recorder.record(pod("p", "u1"), failed);
    sink.failPatch = new NotFoundError(404, {}, { method: "PATCH", path: "/x" });
    await recorder.record(pod("p", "u1"), failed);
    assert.equal(sink.created.length, 2);
    assert.equal(sink.created[1]?.series?.count, 2);
    assert.notEqual(sink.created[1]?.metadata.name, sink.created[0]?.metadata.name);
  });

  it("serializes concurrent repeats so the count on the server only grows", async () => {
    const { sink, recorder } = setup();
    await Promise.all(Array.from({ length: 10 }, () => recorder.record(pod("p", "u1"), failed)));
    await recorder.flush();
    assert.equal(sink.created.length, 1);
    const counts = sink.patches.map((p) => p.series.count);
    assert.deepEqual(
      counts,
      [...counts].sort((a, b) => a - b),
    );
    assert.equal(counts.at(-1), 10);
  });

  it("truncates notes to 1 kB and makes names valid", async () => {
    const { sink, recorder } = setup();
    await recorder.record(
      {
        apiVersion: "rbac.authorization.k8s.io/v1",
        kind: "ClusterRole",
        metadata: { name: "system:Thing", uid: "r" },
      },
      { ...failed, note: "é".repeat(2000) },
    );
    const ev = sink.created[0];
    assert.ok(ev);
    assert.ok(Buffer.byteLength(ev.note ?? "") <= 1024);
    assert.match(ev.metadata.name ?? "", /^system-thing\.[0-9a-f]+$/);
  });
});
