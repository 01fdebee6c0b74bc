// The controller's result handling against a fake list/watch and a FakeClock: nothing here talks to an
// API server or sleeps.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as tick } from "node:timers/promises";
import { Cache } from "../cache/cache.ts";
import type { ListWatcher } from "../cache/reflector.ts";
import type { KubeClient } from "../client/client.ts";
import { kindRef, type KubeList, type KubeObject, type WatchEvent } from "../client/types.ts";
import { FakeClock } from "../clock/index.ts";
import { createLogger } from "../logging/index.ts";
import { controller } from "./builder.ts";
import type { ReconcileContext, Result } from "./reconcile.ts";

const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");

/** One ConfigMap in a list; watches stay open, silent, until the cache stops. */
const oneObject: ListWatcher = {
  list: <T extends KubeObject>(): Promise<KubeList<T>> =>
    Promise.resolve({
      metadata: { resourceVersion: "1" },
      items: [{ metadata: { namespace: "ns", name: "a", resourceVersion: "1" } } as T],
    }),
  watch: <T extends KubeObject>(
    _kind: unknown,
    opts?: { signal?: AbortSignal },
  ): Promise<AsyncIterable<WatchEvent<T>>> =>
    Promise.resolve({
      [Symbol.asyncIterator]: () => ({
        next: () =>
          new Promise<IteratorResult<WatchEvent<T>>>((resolve) =>
            opts?.signal?.addEventListener("abort", () => resolve({ done: true, value: undefined })),
          ),
      }),
    }),
};

/**
 * Only what a controller touches of its client: the REST mapping, views with defaults, and creates
 * (kept in `created`; a create whose signal has fired fails, as a real request would).
 */
function fakeClient(created: KubeObject[] = [], signal?: AbortSignal): KubeClient {
  return {
    fieldManager: "test",
    mapping: () => Promise.resolve({ namespaced: true }),
    withDefaults: (defaults: { signal?: AbortSignal }) =>
      fakeClient(
        created,
        defaults.signal ? AbortSignal.any([signal, defaults.signal].filter((s) => s !== undefined)) : signal,
      ),
    create: (obj: KubeObject) => {
      if (signal?.aborted) return Promise.reject(new Error("request aborted"));
      created.push(obj);
      return Promise.resolve(obj);
    },
  } as unknown as KubeClient;
}

async function runController(
  reconcile: (run: number, ctx: ReconcileContext) => Result | Promise<Result>,
  clock: FakeClock,
  client = fakeClient(),
) {
  const cache = new Cache(oneObject, { clock, streamingList: false, resyncPeriodMs: 0 });
  let runs = 0;
  const c = controller("result-test")
    .for(ConfigMaps)
    .reconcile((_req, ctx) => reconcile(++runs, ctx));
  await c.setup({ client, cache, logger: createLogger({ level: "silent" }), clock });
  cache.start();
  await cache.waitForSync();
  c.start();
  return {
    controller: c,
    runs: () => runs,
    stop: async () => {
      await c.stop(0);
      await cache.stop();
    },
  };
}

describe("controller results", () => {
  it("a requeueAfter that is not a positive delay (0, negative, NaN) backs off instead of spinning", async () => {
    for (const bad of [0, -5, Number.NaN]) {
      const clock = new FakeClock();
      // Stop asking after 100 runs so that a regression fails instead of spinning for ever.
      const ctl = await runController((run) => (run < 100 ? { requeueAfterMs: bad } : undefined), clock);
      for (let i = 0; i < 200; i++) await tick();
      const atOnce = ctl.runs();
      // The per-key backoff spaces the retries: 5, 10, 20, 40 ms ...
      clock.advance(5);
      for (let i = 0; i < 20; i++) await tick();
      const after5ms = ctl.runs();
      await ctl.stop();
      assert.equal(atOnce, 1, `requeueAfter(${bad}): runs without any time passing`);
      assert.equal(after5ms, 2, `requeueAfter(${bad}): runs after the first backoff step`);
    }
  });
});

describe("controller abort (leadership lost)", () => {
  it("a reconcile that ignores its aborted signal cannot record an Event afterwards", async () => {
    const clock = new FakeClock();
    const created: KubeObject[] = [];
    let resume: () => void = () => undefined;
    const gate = new Promise<void>((r) => (resume = r));
    let recorded: Promise<void> | undefined;
    const ctl = await runController(
      async (_run, ctx) => {
        await gate; // ignores ctx.signal, as a slow reconcile may
        recorded = ctx.recorder.record(
          { apiVersion: "v1", kind: "ConfigMap", metadata: { namespace: "ns", name: "a", uid: "u1" } },
          { type: "Normal", reason: "Copied", action: "Reconcile" },
        );
        await recorded;
      },
      clock,
      fakeClient(created),
    );
    for (let i = 0; i < 20; i++) await tick();
    assert.equal(ctl.runs(), 1);
    // Another replica leads from here on: nothing this one does may reach the API server.
    ctl.controller.abort(new Error("leadership lost"));
    resume();
    for (let i = 0; i < 20; i++) await tick();
    await recorded;
    await ctl.stop();
    assert.deepEqual(
      created.map((e) => (e as { reason?: string }).reason),
      [],
      "no Event written after the abort",
    );
  });
});

describe("controller debug line", () => {
  it("each reconcile's debug line carries how long its key waited in the queue (event → reconcile start)", async () => {
    const clock = new FakeClock();
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger({
      level: "debug",
      destination: { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) },
    });
    const cache = new Cache(oneObject, { clock, streamingList: false, resyncPeriodMs: 0 });
    const c = controller("queued-test")
      .for(ConfigMaps)
      .reconcile(() => undefined);
    await c.setup({ client: fakeClient(), cache, logger, clock });
    cache.start();
    await cache.waitForSync();
    // The initial list queued ns/a; it waits 7 ms before a worker takes it.
    clock.advance(7);
    c.start();
    for (let i = 0; i < 20; i++) await tick();
    await c.stop(0);
    await cache.stop();
    const done = lines.filter((l) => l.msg === "reconcile done");
    assert.equal(done.length, 1);
    assert.equal(done[0]?.name, "a");
    assert.equal(done[0]?.queuedMs, 7);
  });
});
