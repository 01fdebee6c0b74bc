/**
 * latency: a steady stream of spec updates (default 200/s) to K AppServices of size 0 (no pods), and for
 * each update the time from the write being acknowledged to the operator's status write for that
 * generation arriving on the bench's own watch: p50 and p99, for the Go peer and opkit, alternating.
 * It is event → status written (end to end), so it includes the reconcile's two applies and the status
 * write; neither operator logs reconcile starts, and both expose only coarse (×10) queue-wait buckets.
 * Updates coalesced by the workqueue (a key changed twice before its reconcile) are counted, not timed.
 */
import { kindRef } from "opkit";
import { adminClient, appService, ensureNamespace, pool } from "./cluster.ts";
import { startAppService } from "./procs.ts";
import { figure, percentile, type Figure } from "./stats.ts";

const AppServices = kindRef("kosmos.io/v1", "AppService");

interface App {
  metadata: { name?: string; generation?: number };
  status?: { observedGeneration?: number };
}

async function oneRun(
  impl: "go" | "opkit",
  run: number,
  o: {
    kubeconfig: string;
    goBin: string;
    root: string;
    rate: number;
    seconds: number;
    apps: number;
    log: (m: string) => void;
  },
): Promise<{ p50: number; p99: number; timed: number; coalesced: number; failed: number }> {
  const client = await adminClient(o.kubeconfig);
  const ns = `bench-lat-${impl}-${run}-${Date.now() % 100000}`;
  await ensureNamespace(client, ns);
  await pool(o.apps, 16, async (i) => {
    await client.create(appService(ns, `app-${i}`, 0));
  });
  const p = startAppService(impl, o);
  const abort = new AbortController();
  try {
    await p.waitFor(/"event":"ready"|caches synced/, 300_000);
    // Wait until the operator has written every AppService's first status.
    for (;;) {
      const items = (await client.listAll(AppServices, { namespace: ns })).items as unknown as App[];
      if (items.every((a) => a.status?.observedGeneration === a.metadata.generation)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    const acked = new Map<string, number>(); // name@generation → when the update was acknowledged
    const written = new Map<string, number>(); // name@generation → when its status arrived
    const list = await client.list(AppServices, { namespace: ns });
    const watch = await client.watch(AppServices, {
      namespace: ns,
      resourceVersion: list.metadata?.resourceVersion,
      signal: abort.signal,
    });
    const watching = (async () => {
      try {
        for await (const ev of watch) {
          const a = ev.object as unknown as App;
          const g = a.status?.observedGeneration;
          const key = `${a.metadata.name}@${g}`;
          if (g !== undefined && !written.has(key)) written.set(key, performance.now());
        }
      } catch {
        /* aborted */
      }
    })();
    const total = Math.round(o.rate * o.seconds);
    const t0 = performance.now();
    let sent = 0;
    let failed = 0;
    const inflight: Promise<void>[] = [];
    while (sent < total) {
      // Send what is due by now, so the rate holds even when a tick is late.
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * o.rate) + 1);
      for (; sent < due; sent++) {
        const name = `app-${sent % o.apps}`;
        const image = `nginx:1.${sent}`;
        inflight.push(
          client.patch(AppServices, name, { spec: { image } }, { namespace: ns, type: "merge" }).then(
            (obj) => {
              acked.set(`${name}@${(obj as unknown as App).metadata.generation}`, performance.now());
            },
            // An apiserver that cannot keep up answers 504: counted, not timed.
            () => {
              failed++;
            },
          ),
        );
      }
      await new Promise((r) => setTimeout(r, 5));
    }
    await Promise.all(inflight);
    const achieved = total / ((performance.now() - t0) / 1000);
    await new Promise((r) => setTimeout(r, 5000));
    abort.abort();
    await watching;
    const lat: number[] = [];
    for (const [key, t] of acked) {
      const w = written.get(key);
      if (w !== undefined) lat.push(Math.max(0, w - t));
    }
    const res = {
      p50: percentile(lat, 50),
      p99: percentile(lat, 99),
      timed: lat.length,
      coalesced: acked.size - lat.length,
      failed,
    };
    o.log(
      `  ${impl}: ${total} updates at ${achieved.toFixed(0)}/s; p50 ${res.p50.toFixed(1)} ms, p99 ${res.p99.toFixed(1)} ms; ${res.timed} timed, ${res.coalesced} coalesced, ${failed} updates failed`,
    );
    return res;
  } finally {
    abort.abort();
    await p.stop();
    await client.delete(kindRef("v1", "Namespace"), ns).catch(() => undefined);
  }
}

/** The latency figures (alternating Go, opkit). */
export async function runLatency(o: {
  kubeconfig: string;
  goBin: string;
  root: string;
  reps: number;
  rate: number;
  seconds: number;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const apps = 100;
  const runs = { go: [] as { p50: number; p99: number }[], opkit: [] as { p50: number; p99: number }[] };
  for (let r = 0; r < o.reps; r++) {
    for (const impl of ["go", "opkit"] as const) {
      o.log(`latency: ${impl}, run ${r + 1} of ${o.reps}, ${o.rate} updates/s for ${o.seconds} s`);
      runs[impl].push(await oneRun(impl, r, { ...o, apps }));
    }
  }
  const params = { updatesPerSecond: o.rate, seconds: o.seconds, appServices: apps, reps: o.reps };
  return [
    figure({
      name: `latency: update → status written, p50 (${o.rate} updates/s)`,
      unit: "ms",
      opkit: runs.opkit.map((r) => r.p50),
      peer: runs.go.map((r) => r.p50),
      parameters: params,
    }),
    figure({
      name: `latency: update → status written, p99 (${o.rate} updates/s)`,
      unit: "ms",
      opkit: runs.opkit.map((r) => r.p99),
      peer: runs.go.map((r) => r.p99),
      target: { on: "value", kind: "max", bound: 10 },
      parameters: params,
    }),
  ];
}
