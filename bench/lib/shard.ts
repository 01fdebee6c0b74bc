/**
 * shard: the AppService operator sharded over 3 replicas (`--shards 16`) beside one unsharded replica,
 * each on N AppServices (size 0: no Pods, so the figure is the operator's work, not the simulated
 * nodes') spread over N/10 namespaces, created at once, on fresh namespaces deleted afterwards. Per side:
 * time to converge (every AppService's status at its generation, its Deployment and Service there);
 * per replica, the watch events its informers received (opkit_informer_received_total, every kind)
 * while converging and for a label change on every AppService, and the objects it caches
 * (opkit_informer_objects); the ratio of each replica's figure to the unsharded replica's. Then one
 * sharded replica is killed with SIGKILL: the time until the survivors hold every shard Lease, and until
 * a change made right after the kill (a new image on one AppService per namespace) has converged.
 * The env needs the ShardedListAndWatch feature gate for server-side filtering (run.ts starts it so);
 * the mode each replica logged is recorded.
 */
import { createHash } from "node:crypto";
import { Deployments, Leases, Services, kindRef, type KubeClient } from "opkit";
import { adminClient, appService, deleteNamespaces, ensureNamespace, pool, scrape } from "./cluster.ts";
import { startAppService, type Proc } from "./procs.ts";
import { figure, sumMetric, type Figure } from "./stats.ts";

const AppServices = kindRef("kosmos.io/v1", "AppService");
const SHARDS = 16;
const REPLICAS = 3;
const LEASE_SECONDS = 6;

interface Replica {
  proc: Proc;
  port: number;
  /** The filtering mode it logged ("server" or "client"; "" unsharded). */
  mode: string;
  /** Its shard identity ("" unsharded). */
  identity: string;
}

interface Side {
  /** Seconds from the first create to every AppService converged. */
  converge: number;
  /** Per replica: watch events received while converging (every kind). */
  convergeEvents: number[];
  /** Per replica: watch events received for a label change on every AppService (every kind). */
  touchEvents: number[];
  /** Per replica: objects cached after converging (every kind). */
  cached: number[];
  /** Per replica: AppServices cached. */
  cachedAppServices: number[];
  /** Sharded side only: seconds from SIGKILL until the survivors held every shard. */
  handover?: number;
  /** Sharded side only: seconds from SIGKILL until changes made meanwhile converged. */
  handoverConverge?: number;
  /** The filtering mode each replica logged ("server", "client"; "" unsharded). */
  modes: string[];
  /** Shards each replica held while measured (sharded side). */
  shardsHeld: number[];
}

interface AppStatus {
  metadata: { namespace?: string; name?: string; generation?: number };
  status?: { observedGeneration?: number };
}

async function metricsOf(r: Replica): Promise<string> {
  return scrape(`http://127.0.0.1:${r.port}/metrics`);
}

const received = async (r: Replica) => sumMetric(await metricsOf(r), "opkit_informer_received_total");

/** Poll until `check` returns a value; throws naming `what` after `timeoutMs`. */
async function until<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`shard: ${what} not reached in ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** How many of `namespaces`' AppServices are at their generation with their Deployment and Service. */
async function convergedCount(client: KubeClient, namespaces: readonly string[]): Promise<number> {
  const inside = (o: { metadata: { namespace?: string } }) => namespaces.includes(o.metadata.namespace ?? "");
  const key = (o: { metadata: { namespace?: string; name?: string } }) =>
    `${o.metadata.namespace}/${o.metadata.name}`;
  const apps = (await client.listAll(AppServices, { labelSelector: "bench=converge" })).items.filter(
    inside,
  ) as unknown as AppStatus[];
  const deps = new Set((await client.listAll(Deployments)).items.filter(inside).map(key));
  const svcs = new Set((await client.listAll(Services)).items.filter(inside).map(key));
  return apps.filter(
    (a) => a.status?.observedGeneration === a.metadata.generation && deps.has(key(a)) && svcs.has(key(a)),
  ).length;
}

/** Shard index → holder identity, from the shard Leases in `namespace`. */
async function holders(client: KubeClient, namespace: string): Promise<string[]> {
  const out = Array<string>(SHARDS).fill("");
  for (const l of (await client.list(Leases, { namespace, labelSelector: "opkit.dev/shard-role=shard" }))
    .items) {
    const m = /-shard-(\d+)$/.exec(l.metadata.name ?? "");
    if (m) out[Number(m[1])] = l.spec?.holderIdentity ?? "";
  }
  return out;
}

async function oneSide(
  sharded: boolean,
  o: { kubeconfig: string; goBin: string; root: string; n: number; run: number; log: (m: string) => void },
): Promise<Side> {
  const label = sharded ? "sharded" : "unsharded";
  const client = await adminClient(o.kubeconfig);
  const nsCount = Math.max(1, Math.round(o.n / 10));
  const tag = `${o.run}-${sharded ? "s" : "u"}`;
  // FNV-1a keeps names that differ only in their last characters in one shard ("ns-0" … "ns-9" all
  // hash into the same 1/16 of the space), so each name ends in a few hex digits derived from its index.
  const namespaces = Array.from(
    { length: nsCount },
    (_, i) => `bench-sh${tag}-${i}-${createHash("sha256").update(String(i)).digest("hex").slice(0, 6)}`,
  );
  const leaseNamespace = `bench-sh${tag}-leases`;
  await pool(nsCount, 16, (i) => ensureNamespace(client, namespaces[i]!));
  await ensureNamespace(client, leaseNamespace);
  const replicas: Replica[] = [];
  let shardsHeld: number[] = [];
  try {
    const count = sharded ? REPLICAS : 1;
    for (let i = 0; i < count; i++) {
      const port = 18390 + i;
      const args = sharded
        ? ["--shards", String(SHARDS), "--shard-lease-duration", String(LEASE_SECONDS), "--log-level", "info"]
        : [];
      const proc = startAppService(
        "opkit",
        o,
        { metricsAddress: `127.0.0.1:${port}`, args },
        { POD_NAMESPACE: leaseNamespace },
      );
      replicas.push({ proc, port, mode: "", identity: "" });
    }
    for (const r of replicas) {
      await r.proc.waitFor(/caches synced/, 300_000);
      if (sharded) {
        const line = await r.proc.waitFor(/"sharding: /, 60_000);
        const logged = JSON.parse(line) as { mode?: string; identity?: string };
        r.mode = logged.mode ?? "";
        r.identity = logged.identity ?? "";
      }
    }
    if (sharded) {
      // Every shard held, at most ceil(16/3) each (the first replica up takes more until the others'
      // heartbeats count).
      const ids = replicas.map((r) => r.identity);
      const spread = await until("16 shards over the 3 replicas, at most 6 each", 120_000, async () => {
        const h = await holders(client, leaseNamespace);
        const balanced =
          h.every((id) => ids.includes(id)) && ids.every((id) => h.filter((x) => x === id).length <= 6);
        return balanced ? h : undefined;
      });
      shardsHeld = ids.map((id) => spread.filter((x) => x === id).length);
      o.log(
        `  ${label}: shards per replica ${ids.map((id) => spread.filter((x) => x === id).length).join(", ")}`,
      );
    }
    // Let start-up lists settle before counting.
    await new Promise((r) => setTimeout(r, 2000));

    const before = await Promise.all(replicas.map(received));
    const t0 = performance.now();
    await pool(o.n, 32, async (i) => {
      await client.create(appService(namespaces[i % nsCount]!, `app-${i}`, 0));
    });
    let last = -1;
    await until(`${label}: ${o.n} AppServices converged`, 1_800_000, async () => {
      const ok = await convergedCount(client, namespaces);
      if (ok !== last)
        o.log(`  ${label}: ${ok}/${o.n} converged after ${((performance.now() - t0) / 1000).toFixed(1)} s`);
      last = ok;
      return ok >= o.n ? true : undefined;
    });
    const converge = (performance.now() - t0) / 1000;
    // Status writes that follow convergence belong to the run.
    await new Promise((r) => setTimeout(r, 3000));
    const afterConverge = await Promise.all(replicas.map(received));
    const convergeEvents = afterConverge.map((x, i) => x - before[i]!);
    const texts = await Promise.all(replicas.map(metricsOf));
    const cached = texts.map((t) => sumMetric(t, "opkit_informer_objects"));
    const cachedAppServices = texts.map((t) =>
      sumMetric(t, "opkit_informer_objects", { kind: "AppService.kosmos.io/v1" }),
    );

    // A label change on every AppService: no reconcile (generation unchanged), only watch events.
    await pool(o.n, 32, async (i) => {
      await client.patch(
        AppServices,
        `app-${i}`,
        { metadata: { labels: { touched: "1" } } },
        { namespace: namespaces[i % nsCount]!, type: "merge" },
      );
    });
    const touched = async () =>
      (await Promise.all(replicas.map(received))).map((x, i) => x - afterConverge[i]!);
    await until(`${label}: the label changes reached the replicas`, 120_000, async () =>
      (await touched()).reduce((a, b) => a + b, 0) >= o.n ? true : undefined,
    );
    // Late arrivals of the same changes.
    await new Promise((r) => setTimeout(r, 2000));
    const touchFinal = await touched();

    const side: Side = {
      converge,
      convergeEvents,
      touchEvents: touchFinal,
      cached,
      cachedAppServices,
      modes: replicas.map((r) => r.mode),
      shardsHeld,
    };

    if (sharded) {
      const victim = replicas[0]!;
      const killedAt = performance.now();
      await victim.proc.kill();
      await pool(nsCount, 16, async (i) => {
        await client.patch(
          AppServices,
          `app-${i}`,
          { spec: { image: "nginx:1.28" } },
          { namespace: namespaces[i]!, type: "merge" },
        );
      });
      const ids = replicas.slice(1).map((r) => r.identity);
      await until("the survivors hold every shard", 120_000, async () => {
        const h = await holders(client, leaseNamespace);
        return h.every((id) => ids.includes(id)) ? true : undefined;
      });
      side.handover = (performance.now() - killedAt) / 1000;
      await until("changes made after the kill converged", 300_000, async () =>
        (await convergedCount(client, namespaces)) >= o.n ? true : undefined,
      );
      side.handoverConverge = (performance.now() - killedAt) / 1000;
      o.log(
        `  ${label}: kill -9 → survivors hold every shard in ${side.handover.toFixed(1)} s, changes converged in ${side.handoverConverge.toFixed(1)} s`,
      );
    }
    o.log(`  ${label}: ${JSON.stringify(side)}`);
    return side;
  } finally {
    await Promise.all(replicas.map((r) => r.proc.stop()));
    o.log(`  deleting ${namespaces.length + 1} namespaces`);
    await deleteNamespaces(client, [...namespaces, leaseNamespace], 1_800_000);
    await client.close();
  }
}

const fmtList = (xs: readonly number[], digits = 0) => xs.map((x) => x.toFixed(digits)).join(", ");

/** The shard figures: sharded (3 replicas) beside one unsharded replica, alternating per run. */
export async function runShard(o: {
  kubeconfig: string;
  goBin: string;
  root: string;
  n: number;
  reps: number;
  log: (m: string) => void;
}): Promise<Figure[]> {
  const runs = { sharded: [] as Side[], unsharded: [] as Side[] };
  for (let r = 0; r < o.reps; r++) {
    for (const sharded of [false, true]) {
      o.log(
        `shard: ${sharded ? "3 sharded replicas" : "1 unsharded replica"}, run ${r + 1} of ${o.reps}, ${o.n} AppServices`,
      );
      (sharded ? runs.sharded : runs.unsharded).push(await oneSide(sharded, { ...o, run: r }));
    }
  }
  const params = {
    appServices: o.n,
    namespaces: Math.max(1, Math.round(o.n / 10)),
    shards: SHARDS,
    replicas: REPLICAS,
    leaseSeconds: LEASE_SECONDS,
    reps: o.reps,
    modes: [...new Set(runs.sharded.flatMap((s) => s.modes))].join(","),
  };
  const peerName = "one unsharded replica";
  // A per-replica figure: the largest replica's value (the worst case) beside the unsharded one, and
  // every replica's value and ratio in the parameters (last run).
  const perReplica = (name: string, unit: string, f: (s: Side) => number[], bound?: number): Figure => {
    const lastS = f(runs.sharded.at(-1)!);
    const lastU = f(runs.unsharded.at(-1)!)[0]!;
    return figure({
      name,
      unit,
      opkit: runs.sharded.map((s) => Math.max(...f(s))),
      peer: runs.unsharded.map((s) => f(s)[0]!),
      peerName,
      ...(bound !== undefined ? { target: { on: "ratio" as const, kind: "max" as const, bound } } : {}),
      parameters: {
        ...params,
        perReplica: fmtList(lastS),
        ratioPerReplica: fmtList(
          lastS.map((x) => x / lastU),
          3,
        ),
        sumOfReplicas: lastS.reduce((a, b) => a + b, 0),
        shardsPerReplica: runs.sharded.at(-1)!.shardsHeld.join(", "),
      },
    });
  };
  return [
    figure({
      name: `shard: converge ${o.n} AppServices, 3 sharded replicas vs 1 unsharded`,
      unit: "s",
      opkit: runs.sharded.map((s) => s.converge),
      peer: runs.unsharded.map((s) => s.converge),
      peerName,
      parameters: params,
    }),
    perReplica(
      "shard: watch events received while converging, largest replica",
      "events",
      (s) => s.convergeEvents,
      0.5,
    ),
    perReplica(
      "shard: watch events received for a label change on all, largest replica",
      "events",
      (s) => s.touchEvents,
      0.5,
    ),
    perReplica("shard: objects cached, largest replica", "objects", (s) => s.cached, 0.5),
    perReplica("shard: AppServices cached, largest replica", "objects", (s) => s.cachedAppServices, 0.5),
    figure({
      name: "shard: kill -9 of a replica → the survivors hold every shard",
      unit: "s",
      opkit: runs.sharded.map((s) => s.handover ?? Number.NaN),
      // Lease duration + two retry periods + a round.
      target: { on: "value", kind: "max", bound: LEASE_SECONDS + 2 * ((LEASE_SECONDS * 2) / 15) + 2 },
      parameters: params,
    }),
    figure({
      name: "shard: kill -9 → changes made meanwhile converged",
      unit: "s",
      opkit: runs.sharded.map((s) => s.handoverConverge ?? Number.NaN),
      parameters: params,
    }),
  ];
}
