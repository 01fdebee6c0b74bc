/**
 * startup: the AppService operator itself (the Go peer and opkit, alternating) from process start to
 * /readyz answering 200 (both: once the caches of AppServices, Deployments and Services synced), with N
 * objects to cache: N headless Services without a selector in one namespace (a kind both operators
 * cache cluster-wide; no selector and no cluster IP, so nothing else in the env acts on them, and no
 * AppService owns them, so nothing is reconciled). Wall time and the process's CPU seconds at the
 * first 200, medians of the runs; the Services are deleted afterwards so later figures start empty.
 */
import { Services, type KubeObject } from "opkit";
import { adminClient, deleteNamespaces, ensureNamespace, pool } from "./cluster.ts";
import { cpuSeconds, freePort, startAppService } from "./procs.ts";
import { figure, missingIndexes, type Figure } from "./stats.ts";

const NAMESPACE = "bench-startup";

function headlessService(name: string): KubeObject {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: NAMESPACE, labels: { bench: "startup" } },
    spec: { clusterIP: "None", ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }] },
  } as KubeObject;
}

async function oneRun(
  impl: "go" | "opkit",
  o: { kubeconfig: string; goBin: string; root: string },
): Promise<{ wall: number; cpu: number }> {
  const port = await freePort();
  const t0 = performance.now();
  const p = startAppService(impl, o, { healthAddress: `127.0.0.1:${port}` });
  let exited = false;
  void p.exited.then(() => (exited = true));
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (r) => r.status === 200,
        () => false,
      );
      if (ok) return { wall: (performance.now() - t0) / 1000, cpu: cpuSeconds(p.pid) };
      if (performance.now() - t0 > 600_000) throw new Error(`${impl}: not ready in 600 s`);
      if (exited) throw new Error(`${impl} exited before ready:\n${p.lines.slice(-20).join("\n")}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await p.stop();
  }
}

/** The startup figures (alternating Go, opkit) with `objects` Services to cache. */
export async function runStartup(o: {
  kubeconfig: string;
  goBin: string;
  root: string;
  reps: number;
  objects: number;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const client = await adminClient(o.kubeconfig);
  try {
    await ensureNamespace(client, NAMESPACE);
    const have = (await client.listAll(Services, { namespace: NAMESPACE })).items.map(
      (s) => s.metadata.name ?? "",
    );
    const missing = missingIndexes(have, o.objects, "svc-");
    o.log(`startup: creating ${missing.length} Services in ${NAMESPACE} (${o.objects} wanted)`);
    await pool(missing.length, 32, async (k) => {
      await client.create(headlessService(`svc-${missing[k]}`));
    });
    // The apiserver is still busy with what was just created (the first run after the creation was
    // the slowest in the first runs, on either side): let it settle.
    if (missing.length > 0) await new Promise((r) => setTimeout(r, 10_000));
    const runs = { go: [] as { wall: number; cpu: number }[], opkit: [] as { wall: number; cpu: number }[] };
    for (let r = 0; r < o.reps; r++) {
      for (const impl of ["go", "opkit"] as const) {
        const res = await oneRun(impl, o);
        o.log(
          `  ${impl}, run ${r + 1} of ${o.reps}: ready in ${res.wall.toFixed(2)} s, ${res.cpu.toFixed(2)} CPU s`,
        );
        runs[impl].push(res);
      }
    }
    const params = { objects: o.objects, kind: "Service (headless, no selector)", reps: o.reps };
    return [
      figure({
        name: `startup: process start to /readyz 200, ${o.objects} Services cached`,
        unit: "s",
        opkit: runs.opkit.map((r) => r.wall),
        peer: runs.go.map((r) => r.wall),
        target: { on: "ratio", kind: "max", bound: 1 },
        parameters: params,
      }),
      figure({
        name: `startup: CPU seconds to /readyz 200, ${o.objects} Services cached`,
        unit: "s",
        opkit: runs.opkit.map((r) => r.cpu),
        peer: runs.go.map((r) => r.cpu),
        parameters: params,
      }),
    ];
  } finally {
    await deleteNamespaces(client, [NAMESPACE], 600_000).catch((err: unknown) =>
      o.log(`startup: ${NAMESPACE} not deleted: ${String(err)}`),
    );
    await client.close();
  }
}
