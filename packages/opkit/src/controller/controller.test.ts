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
import type { Result } from "./reconcile.ts";

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

// Only what a controller touches of its client when nothing in the test writes.
const fakeClient = {
  fieldManager: "test",
  mapping: () => Promise.resolve({ namespaced: true }),
  withDefaults(): KubeClient {
    return this as unknown as KubeClient;
  },
} as unknown as KubeClient;

async function runController(reconcile: (run: number) => Result, clock: FakeClock) {
  const cache = new Cache(oneObject, { clock, streamingList: false, resyncPeriodMs: 0 });
  let runs = 0;
  const c = controller("result-test")
    .for(ConfigMaps)
    .reconcile(() => reconcile(++runs));
  await c.setup({ client: fakeClient, cache, logger: createLogger({ level: "silent" }), clock });
  cache.start();
  await cache.waitForSync();
  c.start();
  return {
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
