/**
 * converge: N AppServices across 10 namespaces, created at once, until every one has its Deployment
 * available (its status says so, Ready=True at its generation) and its Service; for the Go peer and for
 * opkit's AppService operator, alternating, each on fresh namespaces that are deleted afterwards.
 * Per run: wall time, the operator's writes and requests (its own rest_client_requests_total, and the
 * apiserver's apiserver_request_total as a cross-check), its reconciles (controller_runtime_reconcile_total,
 * which both expose), its CPU seconds from /proc, idle and peak RSS, and the CPU it used from start to ready.
 */
import { Services, kindRef } from "opkit";
import {
  adminClient,
  apiserverMetrics,
  appService,
  deleteNamespaces,
  ensureNamespace,
  pool,
  scrape,
} from "./cluster.ts";
import { cpuSeconds, peakRss, rss, startAppService } from "./procs.ts";
import { figure, sumMetric, type Figure } from "./stats.ts";

const AppServices = kindRef("kosmos.io/v1", "AppService");
const WRITES = ["POST", "PUT", "PATCH", "DELETE"];
const NAMESPACES = 10;

interface Run {
  wall: number;
  writes: number;
  requests: number;
  apiserverWrites: number;
  reconciles: number;
  cpu: number;
  idleRss: number;
  peakRss: number;
  startupCpu: number;
  readyMs: number;
}

interface AppStatus {
  metadata: { generation?: number };
  status?: {
    availableReplicas?: number;
    observedGeneration?: number;
    conditions?: { type: string; status: string; observedGeneration?: number }[];
  };
}

function converged(a: AppStatus, size: number): boolean {
  const s = a.status;
  const ready = s?.conditions?.find((c) => c.type === "Ready");
  return (
    s?.observedGeneration === a.metadata.generation &&
    (s?.availableReplicas ?? 0) >= size &&
    ready?.status === "True"
  );
}

/** apiserver writes the operator makes: its applies of children and its writes of AppServices. */
function apiserverWrites(text: string): number {
  return (
    sumMetric(text, "apiserver_request_total", { verb: ["APPLY", "PATCH", "PUT"], resource: "appservices" }) +
    sumMetric(text, "apiserver_request_total", {
      verb: ["APPLY", "PATCH"],
      resource: ["deployments", "services"],
    })
  );
}

async function oneRun(
  impl: "go" | "opkit",
  o: { kubeconfig: string; goBin: string; n: number; root: string; run: number; log: (m: string) => void },
): Promise<Run> {
  const client = await adminClient(o.kubeconfig);
  const namespaces = Array.from({ length: NAMESPACES }, (_, i) => `bench-cv${o.run}-${impl}-${i}`);
  for (const ns of namespaces) await ensureNamespace(client, ns);
  const port = impl === "go" ? 18380 : 18381;
  const t = performance.now();
  const p = startAppService(impl, o, { metricsAddress: `127.0.0.1:${port}` });
  await p.waitFor(impl === "go" ? /"event":"ready"/ : /caches synced/, 300_000);
  try {
    const readyMs = performance.now() - t;
    const startupCpu = cpuSeconds(p.pid);
    await new Promise((r) => setTimeout(r, 3000));
    const idleRss = rss(p.pid);
    const m0 = await scrape(`http://127.0.0.1:${port}/metrics`);
    const a0 = await apiserverMetrics(o.kubeconfig);
    const cpu0 = cpuSeconds(p.pid);
    const t0 = performance.now();
    await pool(o.n, 32, async (i) => {
      await client.create(appService(namespaces[i % NAMESPACES]!, `app-${i}`, 1));
    });
    let last = "";
    for (;;) {
      const apps = (await client.listAll(AppServices, { labelSelector: "bench=converge" })).items.filter(
        (a) => namespaces.includes(a.metadata.namespace ?? ""),
      ) as unknown as AppStatus[];
      const ok = apps.filter((a) => converged(a, 1)).length;
      const services = (await client.listAll(Services, { labelSelector: "app" })).items.filter((s) =>
        namespaces.includes(s.metadata.namespace ?? ""),
      ).length;
      const line = `${ok}/${o.n} converged, ${services} Services`;
      if (line !== last) o.log(`  ${impl}: ${line} after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      last = line;
      if (ok >= o.n && services >= o.n) break;
      if (performance.now() - t0 > 1_800_000) throw new Error(`${impl}: not converged in 30 min: ${line}`);
      await new Promise((r) => setTimeout(r, 1000));
    }
    const wall = (performance.now() - t0) / 1000;
    const cpu = cpuSeconds(p.pid) - cpu0;
    const peak = peakRss(p.pid);
    // Writes that follow convergence (a last status update) belong to the run too.
    await new Promise((r) => setTimeout(r, 3000));
    const m1 = await scrape(`http://127.0.0.1:${port}/metrics`);
    const a1 = await apiserverMetrics(o.kubeconfig);
    const delta = (name: string, match: Record<string, string | readonly string[]> = {}) =>
      sumMetric(m1, name, match) - sumMetric(m0, name, match);
    const run: Run = {
      wall,
      writes: delta("rest_client_requests_total", { method: WRITES }),
      requests: delta("rest_client_requests_total"),
      apiserverWrites: apiserverWrites(a1) - apiserverWrites(a0),
      reconciles: delta("controller_runtime_reconcile_total"),
      cpu,
      idleRss,
      peakRss: peak,
      startupCpu,
      readyMs,
    };
    o.log(`  ${impl}: ${JSON.stringify(run)}`);
    return run;
  } finally {
    await p.stop();
    o.log(`  deleting ${namespaces.length} namespaces`);
    await deleteNamespaces(client, namespaces, 900_000);
  }
}

/** The converge figures. */
export async function runConverge(o: {
  kubeconfig: string;
  goBin: string;
  n: number;
  reps: number;
  root: string;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const runs: Record<"go" | "opkit", Run[]> = { go: [], opkit: [] };
  for (let r = 0; r < o.reps; r++) {
    for (const impl of ["go", "opkit"] as const) {
      o.log(`converge: ${impl}, run ${r + 1} of ${o.reps}, ${o.n} AppServices`);
      runs[impl].push(await oneRun(impl, { ...o, run: r }));
    }
  }
  const params = { appServices: o.n, namespaces: NAMESPACES, podsEach: 1, reps: o.reps };
  const pick = (impl: "go" | "opkit", f: (r: Run) => number) => runs[impl].map(f);
  const both = (name: string, unit: string, f: (r: Run) => number, bound?: number): Figure =>
    figure({
      name,
      unit,
      opkit: pick("opkit", f),
      peer: pick("go", f),
      ...(bound !== undefined ? { target: { on: "ratio" as const, kind: "max" as const, bound } } : {}),
      parameters: params,
    });
  const mib = 2 ** 20;
  return [
    both("converge: wall time", "s", (r) => r.wall, 1),
    both("converge: writes per AppService (operator's client metrics)", "writes", (r) => r.writes / o.n, 1),
    both(
      "converge: writes per AppService (apiserver_request_total)",
      "writes",
      (r) => r.apiserverWrites / o.n,
      1,
    ),
    both(
      "converge: requests per AppService (operator's client metrics)",
      "requests",
      (r) => r.requests / o.n,
    ),
    both("converge: reconciles per AppService", "reconciles", (r) => r.reconciles / o.n),
    both("converge: operator CPU, create → converged", "s", (r) => r.cpu, 1),
    both("converge: idle RSS", "MiB", (r) => r.idleRss / mib, 2.5),
    both("converge: peak RSS", "MiB", (r) => r.peakRss / mib, 2.5),
    figure({
      name: "converge: operator CPU at start-up (to caches synced)",
      unit: "s",
      opkit: pick("opkit", (r) => r.startupCpu),
      peer: pick("go", (r) => r.startupCpu),
      target: { on: "value", kind: "max", bound: 0.3 },
      parameters: params,
    }),
    both("converge: start to ready", "s", (r) => r.readyMs / 1000),
  ];
}
