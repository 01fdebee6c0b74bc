/**
 * The figures that need no cluster: the workqueue's add/get/done rate with 4 workers over 100k keys,
 * and the rate at which a recorded stream of Pod watch events is parsed and stored by opkit's cache
 * (a ListWatcher that replays JSON lines, so no network is measured).
 */
import { Cache, Pods, WorkQueue, type KindRef, type KubeList, type KubeObject, type WatchEvent } from "opkit";
import { realisticPod } from "./pods.ts";

/** add + get + done per second through the workqueue with `workers` concurrent workers. */
export async function queueOpsPerSecond(keys: number, workers = 4): Promise<number> {
  const q = new WorkQueue<string>();
  const names = Array.from({ length: keys }, (_, i) => `ns-${i % 10}/obj-${i}`);
  let done = 0;
  const t0 = performance.now();
  const worker = async () => {
    for (;;) {
      const item = await q.get();
      if (!item) return;
      q.done(item.key);
      if (++done === keys) q.shutDown();
    }
  };
  const running = Array.from({ length: workers }, () => worker());
  // Added in chunks so the workers run while keys arrive, as informer events do.
  for (let i = 0; i < keys; i += 1000) {
    for (let j = i; j < Math.min(keys, i + 1000); j++) q.add(names[j]!);
    await new Promise<void>((r) => setImmediate(r));
  }
  await Promise.all(running);
  const s = (performance.now() - t0) / 1000;
  return (3 * keys) / s;
}

/** The recorded stream: `events` watch events as JSON lines over `distinct` Pods (ADDED, then MODIFIED). */
export function recordStream(events: number, distinct: number): string[] {
  const lines: string[] = [];
  for (let i = 0; i < events; i++) {
    const pod = realisticPod("bench-decode", `pod-${i % distinct}`, i);
    (pod.metadata as { resourceVersion?: string }).resourceVersion = String(100 + i);
    lines.push(JSON.stringify({ type: i < distinct ? "ADDED" : "MODIFIED", object: pod }));
  }
  return lines;
}

/** Watch events per second parsed from the recorded lines into an opkit Cache of Pods. */
export async function decodeEventsPerSecond(lines: readonly string[]): Promise<number> {
  const abort = new AbortController();
  let delivered = 0;
  let finish: () => void = () => {};
  const finished = new Promise<void>((r) => (finish = r));
  let t0 = 0;
  const replay: ConstructorParameters<typeof Cache>[0] = {
    async list<T extends KubeObject>(_kind: KindRef<T>): Promise<KubeList<T>> {
      return { apiVersion: "v1", kind: "PodList", metadata: { resourceVersion: "1" }, items: [] };
    },
    async watch<T extends KubeObject>(_kind: KindRef<T>): Promise<AsyncIterable<WatchEvent<T>>> {
      return (async function* () {
        t0 = performance.now();
        for (const line of lines) yield JSON.parse(line) as WatchEvent<T>;
        // The stream stays open (as a real watch does) until the cache stops.
        await new Promise<void>((r) => abort.signal.addEventListener("abort", () => r()));
      })();
    },
  };
  const cache = new Cache(replay, { streamingList: false, resyncPeriodMs: 0 });
  const informer = cache.informer(Pods);
  informer.addEventHandler({
    onAdd: () => {
      if (++delivered === lines.length) finish();
    },
    onUpdate: () => {
      if (++delivered === lines.length) finish();
    },
  });
  cache.start();
  await finished;
  const s = (performance.now() - t0) / 1000;
  abort.abort();
  await cache.stop();
  return lines.length / s;
}
