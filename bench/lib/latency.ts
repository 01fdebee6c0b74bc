/**
 * latency: event → reconcile start inside each operator, at a steady rate of updates (default 200/s)
 * spread over a few AppServices (default 20, size 0), for the Go peer and opkit, alternating: p50 and
 * p99 of every reconcile that started during the stream.
 *
 * The update is a merge patch of a label on an AppService's Deployment: both operators own
 * their Deployments and reconcile the owner on every change of one, and a label changes nothing
 * else (an annotation would: the Deployment controller copies annotations to the ReplicaSet) (no rollout, no status write, no apply that is not a no-op), so the apiserver sees one write per
 * update beside the operators' own requests (the Go peer applies both children on every reconcile, opkit
 * skips an apply its cache shows is a no-op). Each Deployment gets the label once before the stream. The earlier form of this figure patched `spec.image`, which made every update a Deployment
 * rollout (a new ReplicaSet, the old ones pruned, Deployment and AppService status writes: about eight
 * writes per update), sent without bound on in-flight requests; at 200/s that storm overran the
 * 2-core env's etcd and the apiserver answered 504 (its request timeout). Here at most `maxInflight`
 * patches are in flight; a send that would exceed it is counted as `behind` (the rate not sustained).
 * BENCH_LATENCY_UPDATE=image brings back the image patches, to see their cost (writes per update).
 *
 * The wait is measured inside each operator, per reconcile: the Go peer (`--log-reconciles`) notes
 * when controller-runtime's handler passes the first not yet reconciled event of a key (a predicate
 * placed last) and prints the time to the reconcile's start; opkit at debug level prints each
 * reconcile's queue wait since the key's first add (the value behind workqueue_queue_duration_seconds)
 * in its "reconcile done" line. Both start at the event handler, after the watch event was decoded.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { kindRef } from "opkit";
import {
  adminClient,
  apiserverMetrics,
  appService,
  deleteNamespaces,
  ensureNamespace,
  pool,
} from "./cluster.ts";
import { startAppService } from "./procs.ts";
import { dueBy, figure, percentile, reconcileWaits, sumMetric, type Figure } from "./stats.ts";

const AppServices = kindRef("kosmos.io/v1", "AppService");
const Deployments = kindRef("apps/v1", "Deployment");
const WRITES = ["POST", "PUT", "PATCH", "DELETE", "APPLY"];

interface App {
  metadata: { name?: string; generation?: number };
  status?: { observedGeneration?: number; conditions?: { type: string; status: string }[] };
}

interface Run {
  p50: number;
  p99: number;
  reconciles: number;
  achieved: number;
  failed: number;
  behind: number;
  writesPerUpdate: number;
  patchP99: number;
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
    maxInflight: number;
    update: "label" | "image";
    log: (m: string) => void;
  },
): Promise<Run> {
  const client = await adminClient(o.kubeconfig);
  const ns = `bench-lat-${impl}-${run}-${Date.now() % 100000}`;
  await ensureNamespace(client, ns);
  await pool(o.apps, 16, async (i) => {
    await client.create(appService(ns, `app-${i}`, 0));
  });
  const p = startAppService(impl, o, { logReconciles: true });
  try {
    await p.waitFor(/"event":"ready"|caches synced/, 300_000);
    // Every AppService has its Deployment and is Ready before the stream starts.
    for (;;) {
      const items = (await client.listAll(AppServices, { namespace: ns })).items as unknown as App[];
      const deps = (await client.listAll(Deployments, { namespace: ns })).items.length;
      // Ready=True: the Deployment controller has observed the Deployment, so its own status writes
      // (which make both operators write status too) are over before the stream starts.
      const ready = (a: App) =>
        a.status?.observedGeneration === a.metadata.generation &&
        (a.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
      if (deps === o.apps && items.every(ready)) break;
      await new Promise((r) => setTimeout(r, 500));
    }
    if (o.update === "label") {
      // The stream's label exists before it starts: the figure is the steady state, not an operator's
      // reaction to the first foreign key on each child (opkit applies once when a key appears).
      await pool(o.apps, 16, async (i) => {
        await client.patch(
          Deployments,
          `app-${i}`,
          { metadata: { labels: { "bench.opkit.dev/tick": "warm-up" } } },
          { namespace: ns, type: "merge" },
        );
      });
    }
    await new Promise((r) => setTimeout(r, 2000)); // let the Deployment controller's writes settle
    // And the operator's reconciles of them (each logs a line per reconcile): on a busy env, the warm-up's
    // reconciles could otherwise still be queued when the stream starts.
    // Quiet: no new line for a second (at most 30 s).
    const quietBy = Date.now() + 30_000;
    let seen = p.lines.length;
    for (let still = 0; still < 5 && Date.now() < quietBy;) {
      await new Promise((r) => setTimeout(r, 200));
      still = p.lines.length === seen ? still + 1 : 0;
      seen = p.lines.length;
    }
    const before = await apiserverMetrics(o.kubeconfig);
    const total = Math.round(o.rate * o.seconds);
    const mark = Date.now();
    const t0 = performance.now();
    let sent = 0;
    let failed = 0;
    let behind = 0;
    let inflight = 0;
    const patchMs: number[] = [];
    const codes = new Map<string, number>();
    const pending: Promise<void>[] = [];
    while (sent < total) {
      const due = dueBy(performance.now() - t0, o.rate, total);
      for (; sent < due; sent++) {
        if (inflight >= o.maxInflight) {
          behind++;
          continue;
        }
        const name = `app-${sent % o.apps}`;
        const at = performance.now();
        inflight++;
        pending.push(
          (o.update === "image"
            ? client.patch(
                AppServices,
                name,
                { spec: { image: `nginx:1.${sent}` } },
                { namespace: ns, type: "merge" },
              )
            : client.patch(
                Deployments,
                name,
                { metadata: { labels: { "bench.opkit.dev/tick": String(sent) } } },
                { namespace: ns, type: "merge" },
              )
          )
            .then(
              () => void patchMs.push(performance.now() - at),
              (err: unknown) => {
                failed++;
                const code = String((err as { code?: number }).code ?? "error");
                codes.set(code, (codes.get(code) ?? 0) + 1);
              },
            )
            .finally(() => inflight--),
        );
      }
      await new Promise((r) => setTimeout(r, 2));
    }
    await Promise.all(pending);
    const achieved = (total - behind - failed) / ((performance.now() - t0) / 1000);
    await new Promise((r) => setTimeout(r, 3000)); // the last reconciles
    const after = await apiserverMetrics(o.kubeconfig);
    const writes =
      sumMetric(after, "apiserver_request_total", { verb: WRITES }) -
      sumMetric(before, "apiserver_request_total", { verb: WRITES });
    const waits = reconcileWaits(p.lines, mark);
    // BENCH_LOG_DIR keeps each run's operator log, to see where a long wait came from.
    const logDir = process.env.BENCH_LOG_DIR;
    if (logDir) {
      mkdirSync(logDir, { recursive: true });
      writeFileSync(join(logDir, `latency-${impl}-${run}.log`), p.lines.join("\n") + "\n");
    }
    const res: Run = {
      p50: percentile(waits, 50),
      p99: percentile(waits, 99),
      reconciles: waits.length,
      achieved,
      failed,
      behind,
      // Every write the apiserver took in the window (all clients: the bench, the operator, the
      // controller-manager, kwok), per update sent.
      writesPerUpdate: writes / Math.max(1, total - behind),
      patchP99: percentile(patchMs, 99),
    };
    o.log(
      `  ${impl}: ${total - behind} of ${total} patches at ${achieved.toFixed(0)}/s (patch p99 ${res.patchP99.toFixed(1)} ms, ` +
        `${failed} failed${codes.size ? ` ${JSON.stringify(Object.fromEntries(codes))}` : ""}, ${behind} not sent: ${o.maxInflight} in flight), ` +
        `${res.writesPerUpdate.toFixed(2)} apiserver writes per update; ${res.reconciles} reconciles, ` +
        `event → reconcile start p50 ${res.p50.toFixed(2)} ms, p99 ${res.p99.toFixed(2)} ms`,
    );
    return res;
  } finally {
    await p.stop();
    // Gone before the next run starts: that run's operator watches every namespace, and reconciling this
    // one's AppServices while it terminates (applies and Events refused with 403) held its single worker
    // for ~0.8 s at a time, which was the p99 it reported.
    await deleteNamespaces(client, [ns], 300_000).catch(() => undefined);
    await client.close();
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
  apps?: number;
  /** "label" (default): a label on the Deployment; "image": the AppService's spec.image (a rollout each). */
  update?: "label" | "image";
  log: (m: string) => void;
}): Promise<Figure[]> {
  const apps = o.apps ?? 20;
  const update = o.update ?? "label";
  const maxInflight = 64;
  const runs = { go: [] as Run[], opkit: [] as Run[] };
  for (let r = 0; r < o.reps; r++) {
    for (const impl of ["go", "opkit"] as const) {
      o.log(
        `latency: ${impl}, run ${r + 1} of ${o.reps}, ${o.rate} updates/s for ${o.seconds} s over ${apps} AppServices`,
      );
      runs[impl].push(await oneRun(impl, r, { ...o, apps, maxInflight, update }));
    }
  }
  const params = {
    updatesPerSecond: o.rate,
    seconds: o.seconds,
    appServices: apps,
    maxInflight,
    reps: o.reps,
    update:
      update === "image"
        ? "merge patch of the AppService's spec.image (a Deployment rollout per update)"
        : "merge patch of a label on the AppService's Deployment",
    achievedPerSecond: Math.round(Math.min(...[...runs.go, ...runs.opkit].map((r) => r.achieved))),
  };
  const pick = (k: keyof Run) => ({ opkit: runs.opkit.map((r) => r[k]), peer: runs.go.map((r) => r[k]) });
  return [
    figure({
      name: `latency: event → reconcile start, p50 (${o.rate} updates/s)`,
      unit: "ms",
      ...pick("p50"),
      parameters: params,
    }),
    figure({
      name: `latency: event → reconcile start, p99 (${o.rate} updates/s)`,
      unit: "ms",
      ...pick("p99"),
      target: { on: "value", kind: "max", bound: 10 },
      parameters: params,
    }),
    figure({
      name: `latency: updates per second the env took (asked ${o.rate}/s, at most ${maxInflight} in flight)`,
      unit: "updates/s",
      ...pick("achieved"),
      parameters: params,
    }),
    figure({
      name: `latency: reconciles timed (${o.rate} updates/s for ${o.seconds} s)`,
      unit: "reconciles",
      ...pick("reconciles"),
      parameters: params,
    }),
  ];
}
