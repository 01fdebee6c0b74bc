/**
 * failover: two replicas of the AppService operator with leader election; the leader is killed with
 * SIGKILL (it cannot release its Lease), an AppService is created at once, and the figure is the time
 * until its status is written, which only the standby, once it holds the Lease, can do. Bounded below by
 * the Lease duration (15 s for both opkit and controller-runtime by default).
 */
import { kindRef } from "opkit";
import { adminClient, appService, ensureNamespace } from "./cluster.ts";
import { startAppService, type Proc } from "./procs.ts";
import { figure, type Figure } from "./stats.ts";

const AppServices = kindRef("kosmos.io/v1", "AppService");

const ELECTED = /"event":"elected"|became leader/;

async function oneRun(
  impl: "go" | "opkit",
  run: number,
  o: { kubeconfig: string; goBin: string; root: string; log: (m: string) => void },
): Promise<number> {
  const client = await adminClient(o.kubeconfig);
  const ns = `bench-fo-${impl}-${run}-${Date.now() % 100000}`;
  await ensureNamespace(client, ns);
  const leader = startAppService(impl, o, { leaderElect: true });
  let standby: Proc | undefined;
  try {
    await leader.waitFor(ELECTED, 120_000);
    standby = startAppService(impl, o, { leaderElect: true });
    // The standby starts, syncs its caches and waits on the Lease.
    await new Promise((r) => setTimeout(r, 10_000));
    if (standby.lines.some((l) => ELECTED.test(l))) throw new Error(`${impl}: two leaders`);
    await leader.kill();
    const t0 = performance.now();
    await client.create(appService(ns, "failover", 1));
    for (;;) {
      const app = (await client.get(AppServices, "failover", { namespace: ns })) as {
        status?: { observedGeneration?: number };
      };
      if (app.status?.observedGeneration) break;
      if (performance.now() - t0 > 120_000) throw new Error(`${impl}: no reconcile by the standby in 120 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const s = (performance.now() - t0) / 1000;
    o.log(`  ${impl}: the standby reconciled ${s.toFixed(2)} s after the leader's SIGKILL`);
    return s;
  } finally {
    await leader.kill();
    await standby?.stop();
    await client.delete(kindRef("v1", "Namespace"), ns).catch(() => undefined);
  }
}

/** The failover figure (alternating Go, opkit). */
export async function runFailover(o: {
  kubeconfig: string;
  goBin: string;
  root: string;
  reps: number;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const runs = { go: [] as number[], opkit: [] as number[] };
  for (let r = 0; r < o.reps; r++) {
    for (const impl of ["go", "opkit"] as const) {
      o.log(`failover: ${impl}, run ${r + 1} of ${o.reps}`);
      runs[impl].push(await oneRun(impl, r, o));
    }
  }
  return [
    figure({
      name: "failover: leader SIGKILL → first reconcile by the standby",
      unit: "s",
      opkit: runs.opkit,
      peer: runs.go,
      // Lease duration (15 s) + retry period (2 s) + the reconcile.
      target: { on: "value", kind: "max", bound: 18 },
      parameters: { leaseDurationSeconds: 15, reps: o.reps },
    }),
  ];
}
