/**
 * The AppService operator sharded (`--shards 16`), run as separate processes under its generated RBAC,
 * against a real control plane with the `ShardedListAndWatch` feature gate on (the test env's default):
 * - three replicas hold every shard exactly once (at most ceil(16/3) each) and reconcile 150
 *   AppServices in 30 namespaces to convergence;
 * - kill -9 of one replica: its shards move to the others within lease duration + retries, and a change
 *   made meanwhile converges;
 * - a replacement brings it back to three live replicas holding all 16 shards; two more (3 → 5)
 *   rebalance to at most ceil(16/5) = 4 each, the new ones taking shards;
 * - heartbeat Leases do not pile up: replicas stopping cleanly delete theirs, and the killed one's is
 *   deleted by a live replica once expired for 3 × the lease duration;
 * - throughout, no key is reconciled by two replicas at once: every replica logs each reconcile's
 *   wall-clock interval (debug line "reconcile done") and intervals of one key never overlap across
 *   replicas;
 * - with server-side filtering each replica receives about a third of the objects and events and caches
 *   about a third; with client-side filtering (what a server without the gate gives) each receives
 *   everything, and caches the same third.
 * Sizes are CI sizes; the figures are printed for the README.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Deployments, Leases, scrape, type Sample } from "opkit";
import { eventually, type OperatorProcess, type OperatorProject, type TestEnv } from "opkit/testenv";
import { operatorTest } from "../../demo/operator-test.ts";
import { AppService } from "../src/api/v1/appservice.ts";

const root = fileURLToPath(new URL("..", import.meta.url));
const SHARDS = 16;
const NAMESPACES = 30;
const PER_NAMESPACE = 5;
const LEASE_SECONDS = 6;

interface Replica {
  op: OperatorProcess;
  identity: string;
  metricsPort: number;
  mode: string;
}

interface Interval {
  key: string;
  start: number;
  end: number;
  replica: string;
}

function json(line: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(line) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

/** Every reconcile interval a replica logged. */
function intervals(r: Replica): Interval[] {
  const out: Interval[] = [];
  for (const line of r.op.output) {
    if (!line.includes('"reconcile done"')) continue;
    const l = json(line);
    if (!l) continue;
    out.push({
      key: `${String(l.namespace)}/${String(l.name)}`,
      start: Number(l.startedAt),
      end: Number(l.endedAt),
      replica: r.identity,
    });
  }
  return out;
}

/** No key's reconcile intervals overlap across replicas. Returns how many intervals were checked. */
function assertNoOverlap(replicas: Replica[]): number {
  const byKey = new Map<string, Interval[]>();
  for (const r of replicas) for (const i of intervals(r)) byKey.set(i.key, [...(byKey.get(i.key) ?? []), i]);
  let n = 0;
  for (const [key, list] of byKey) {
    list.sort((a, b) => a.start - b.start);
    n += list.length;
    for (let i = 1; i < list.length; i++) {
      const prev = list[i - 1] as Interval;
      const cur = list[i] as Interval;
      if (prev.replica !== cur.replica)
        assert.ok(
          cur.start >= prev.end,
          `${key} reconciled by ${prev.replica} [${prev.start}, ${prev.end}] and ${cur.replica} [${cur.start}, ${cur.end}] at once`,
        );
    }
  }
  return n;
}

async function metrics(r: Replica): Promise<Sample[]> {
  // A measurement, not what is tested: under make test's load three replicas, the API server and other
  // test files share 2 cores, and a 5 s scrape once timed out while the replicas were reconciling.
  return scrape(`http://127.0.0.1:${r.metricsPort}/metrics`, { timeoutMs: 20_000 });
}

function sum(samples: Sample[], name: string): number {
  return samples.filter((s) => s.name === name).reduce((a, s) => a + s.value, 0);
}

/** How many of the shards in `holders` (shard → identity) a replica holds. */
function spreadOf(r: Replica, holders: string[]): number {
  return holders.filter((id) => id === r.identity).length;
}

/** AppService objects and events a replica's informers received so far. */
async function appReceived(r: Replica): Promise<number> {
  return sum(
    (await metrics(r)).filter((s) => s.labels.kind?.startsWith("AppService.")),
    "opkit_informer_received_total",
  );
}

describe("AppService operator, sharded", () => {
  let env: TestEnv;
  let project: OperatorProject;
  let namespaces: string[] = [];
  const replicas: Replica[] = [];
  const everyone: Replica[] = [];
  const savedPodNamespace = process.env.POD_NAMESPACE;
  // The replica killed in the first scenario; the second checks its heartbeat is collected.
  let killed: { identity: string; at: number } | undefined;

  async function startReplica(filtering = "auto"): Promise<Replica> {
    const op = await project.start([
      "--shards",
      String(SHARDS),
      "--shard-lease-duration",
      String(LEASE_SECONDS),
      "--shard-filtering",
      filtering,
      "--log-level",
      "debug",
    ]);
    const sharding = json(await op.waitForLine(/"sharding: /)) ?? {};
    const serving = json(await op.waitForLine(/serving metrics and probes/)) ?? {};
    const r = {
      op,
      identity: String(sharding.identity),
      metricsPort: Number(serving.metrics),
      mode: String(sharding.mode),
    };
    replicas.push(r);
    everyone.push(r);
    return r;
  }

  /** Shard index → holder identity ("" when free), from the shard Leases. */
  async function holders(): Promise<string[]> {
    const leases = await env.client.list(Leases, { namespace: project.namespace });
    const out = Array<string>(SHARDS).fill("");
    for (const l of leases.items) {
      const m = /-shard-(\d+)$/.exec(l.metadata.name ?? "");
      if (m) out[Number(m[1])] = l.spec?.holderIdentity ?? "";
    }
    return out;
  }

  /** Holder identities of the heartbeat Leases (one per replica that has not stopped cleanly). */
  async function heartbeats(): Promise<string[]> {
    const leases = await env.client.list(Leases, {
      namespace: project.namespace,
      labelSelector: "opkit.dev/shard-role=member",
    });
    return leases.items.map((l) => l.spec?.holderIdentity ?? "").sort();
  }

  /** Every shard held by one of `live`, at most `max` each. */
  async function balanced(live: Replica[], max: number): Promise<string[] | undefined> {
    const h = await holders();
    const ids = new Set(live.map((r) => r.identity));
    if (!h.every((id) => ids.has(id))) return undefined;
    for (const r of live) if (h.filter((id) => id === r.identity).length > max) return undefined;
    return h;
  }

  async function converged(): Promise<boolean> {
    const apps = await env.client.listAll(AppService);
    const ours = apps.items.filter((a) => namespaces.includes(a.metadata.namespace ?? ""));
    if (ours.length !== NAMESPACES * PER_NAMESPACE) return false;
    const deps = await env.client.listAll(Deployments);
    const depKeys = new Set(deps.items.map((d) => `${d.metadata.namespace}/${d.metadata.name}`));
    return ours.every(
      (a) =>
        a.status?.observedGeneration === a.metadata.generation &&
        depKeys.has(`${a.metadata.namespace}/${a.metadata.name}`) &&
        // the Deployment follows the size
        deps.items.find(
          (d) => d.metadata.namespace === a.metadata.namespace && d.metadata.name === a.metadata.name,
        )?.spec?.replicas === a.spec.size,
    );
  }

  /**
   * Label every AppService (no reconcile: the controller filters on generation) and count the watch
   * events each replica received for it. Returns per replica: events received, objects cached, shards held.
   */
  async function touchAndMeasure(live: Replica[], value: string, everyEvent: boolean) {
    const before = await Promise.all(live.map(appReceived));
    await Promise.all(
      namespaces.flatMap((ns) =>
        Array.from({ length: PER_NAMESPACE }, (_, i) =>
          env.client.patch(
            AppService,
            `app-${i}`,
            { metadata: { labels: { touched: value } } },
            { namespace: ns, type: "merge" },
          ),
        ),
      ),
    );
    const total = NAMESPACES * PER_NAMESPACE;
    const deltas = await eventually(
      "the label changes reached the replicas",
      async () => {
        const d = (await Promise.all(live.map(appReceived))).map((n, i) => n - (before[i] ?? 0));
        const done = everyEvent ? d.every((n) => n >= total) : d.reduce((a, b) => a + b, 0) >= total;
        return done ? d : undefined;
      },
      30_000,
      250,
    );
    return Promise.all(
      live.map(async (r, i) => {
        const m = await metrics(r);
        return {
          events: deltas[i] ?? 0,
          cached: sum(m, "opkit_informer_objects"),
          appServices: sum(m, "opkit_shard_keys"),
          held: sum(m, "opkit_shards_held"),
        };
      }),
    );
  }

  /** Run a scenario; on failure, print the last lines of every replica first. */
  async function diagnose(fn: () => Promise<void>): Promise<void> {
    try {
      await fn();
    } catch (err) {
      for (const r of everyone) process.stderr.write(`--- ${r.identity}\n${r.op.tail(15)}\n`);
      throw err;
    }
  }

  operatorTest(root, {
    namespace: "appservice-shards",
    setup: async (t) => {
      ({ env, project } = t);
      // The shard Leases live where the pod would run (the generated Deployment sets POD_NAMESPACE).
      process.env.POD_NAMESPACE = project.namespace;
      namespaces = await Promise.all(
        Array.from({ length: NAMESPACES }, (_, i) => env.namespace(`shard-${i}`)),
      );
      // The replicas shard every AppService in the cluster, and the figures below count what they hold:
      // wait until those that earlier test files left in namespaces being deleted are gone.
      const foreign = async () =>
        (await env.client.list(AppService)).items
          .filter((a) => !namespaces.includes(a.metadata.namespace ?? ""))
          .map((a) => `${a.metadata.namespace}/${a.metadata.name}`);
      await eventually(
        "no other test's AppServices left in the cluster",
        async () => (await foreign()).length === 0,
        120_000,
        1_000,
      ).catch(async (err: unknown) => {
        throw new Error(`${String(err)}: ${(await foreign()).slice(0, 10).join(", ")}`);
      });
    },
    afterCleanup: async () => {
      if (savedPodNamespace === undefined) delete process.env.POD_NAMESPACE;
      else process.env.POD_NAMESPACE = savedPodNamespace;
    },
  });

  it("3 replicas share 16 shards and converge 150 AppServices; kill -9 moves shards; 3 → 5 rebalances; never two at once", () =>
    diagnose(async () => {
      const started = performance.now();
      await Promise.all([startReplica(), startReplica(), startReplica()]);
      // Releases before 1.36 lack ShardedListAndWatch: the replicas detect it and filter on the client.
      const serverSide = env.featureGates.ShardedListAndWatch === true;
      if (!serverSide)
        process.stderr.write(
          `Kubernetes ${env.kubernetesVersion} lacks ShardedListAndWatch: client-side filtering\n`,
        );
      for (const r of replicas)
        assert.equal(r.mode, serverSide ? "server" : "client", "the mode follows the gate");
      const spread = await eventually(
        "16 shards over 3 replicas, at most 6 each",
        () => balanced(replicas, 6),
        60_000,
      );
      const counts = replicas.map((r) => spread.filter((id) => id === r.identity).length);
      process.stderr.write(`shards per replica after start: ${counts.join(", ")}\n`);

      // 150 AppServices in 30 namespaces, created together.
      const t0 = performance.now();
      await Promise.all(
        namespaces.flatMap((ns) =>
          Array.from({ length: PER_NAMESPACE }, (_, i) =>
            env.client.create(
              AppService.new(
                `app-${i}`,
                {
                  size: 0,
                  image: "nginx:1.27",
                  ports: [{ name: "http", port: 80, targetPort: 80, protocol: "TCP" }],
                },
                { namespace: ns },
              ),
            ),
          ),
        ),
      );
      await eventually("150 AppServices converge", converged, 120_000, 1_000);
      process.stderr.write(
        `150 AppServices converged in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`,
      );
      assert.deepEqual(await balanced(replicas, 6), spread, "no shard moved while nothing changed");

      // Each replica reconciled only the keys of its shards; together every key. (The replicas watch
      // the whole cluster: AppServices other test files left behind are reconciled too, not counted.)
      const reconciledBy = new Map<string, Set<string>>();
      for (const r of replicas)
        for (const i of intervals(r))
          if (namespaces.includes(i.key.split("/")[0] ?? ""))
            reconciledBy.set(i.key, (reconciledBy.get(i.key) ?? new Set()).add(r.identity));
      assert.equal(reconciledBy.size, NAMESPACES * PER_NAMESPACE);
      for (const [key, by] of reconciledBy)
        assert.equal(by.size, 1, `${key} reconciled by ${[...by].join(", ")}`);

      // Server-side filtering: what each replica received and caches.
      const serverFigures = await touchAndMeasure(replicas, "1", false);
      process.stderr.write(
        `${serverSide ? "server" : "client"}-side filtering, per replica: ${JSON.stringify(serverFigures)}\n`,
      );
      const totalCached = serverFigures.reduce((a, f) => a + f.cached, 0);
      for (const f of serverFigures) {
        // An AppService, its Deployment and its Service per key it holds (how many depends on how the
        // namespaces hash, so a fixed share of the total would be flaky).
        assert.ok(
          f.cached < totalCached && f.cached <= f.appServices * 3 + 20,
          `a replica caches only its shards: ${f.cached} of ${totalCached} for its ${f.appServices} AppServices`,
        );
        assert.ok(f.appServices > 0, "opkit_shard_keys counts its AppServices");
        // Its own shards' changes (about one per AppService it holds, plus a few status writes still
        // settling), not everyone's: how many it holds depends on how 30 random namespaces hash.
        if (serverSide)
          assert.ok(
            f.events < NAMESPACES * PER_NAMESPACE && f.events <= f.appServices * 1.5 + 10,
            `a replica receives only its shards' events: ${f.events} for its ${f.appServices} AppServices`,
          );
      }
      // Each label change reaches one replica (a status write still settling may add a few events).
      const events = serverFigures.reduce((a, f) => a + f.events, 0);
      if (serverSide)
        assert.ok(
          events >= NAMESPACES * PER_NAMESPACE && events < NAMESPACES * PER_NAMESPACE * 1.5,
          `each label change reached one replica: ${events} events in all`,
        );
      assert.equal(
        serverFigures.reduce((a, f) => a + f.appServices, 0),
        NAMESPACES * PER_NAMESPACE,
        "every AppService counted in exactly one replica's opkit_shard_keys",
      );

      // kill -9 one replica; change the AppServices of its shards meanwhile.
      const victim = replicas[0] as Replica;
      const victimShards = spread.flatMap((id, i) => (id === victim.identity ? [i] : []));
      const killedAt = performance.now();
      await victim.op.kill();
      replicas.splice(0, 1);
      await Promise.all(
        namespaces.map((ns) =>
          env.client.patch(AppService, "app-0", { spec: { size: 1 } }, { namespace: ns, type: "merge" }),
        ),
      );
      const moved = await eventually(
        "the dead replica's shards move to the others",
        () => balanced(replicas, 8),
        (LEASE_SECONDS + 20) * 1000,
        250,
      );
      const handoverS = (performance.now() - killedAt) / 1000;
      process.stderr.write(
        `kill -9: shards ${victimShards.join(",")} moved in ${handoverS.toFixed(1)} s (lease ${LEASE_SECONDS} s)\n`,
      );
      assert.ok(moved.every((id) => id !== victim.identity));
      assert.ok(
        handoverS < LEASE_SECONDS + 2 * ((LEASE_SECONDS * 2) / 15) + 6,
        `handover took ${handoverS} s`,
      );
      await eventually("changes made meanwhile converge", converged, 90_000, 1_000);

      // Back to 3 live replicas holding all 16, then scale 3 → 5: at most ceil(16/5) = 4 each. The shards
      // that move are requeued by their new holders at once, so the overlap check at the end covers
      // the handovers.
      await startReplica();
      const threeSpread = await eventually(
        "16 shards over 3 replicas again",
        () => balanced(replicas, 6),
        60_000,
        250,
      );
      const three = [...replicas];
      const scaledAt = performance.now();
      await Promise.all([startReplica(), startReplica()]);
      const rebalanced = await eventually(
        "16 shards over 5 replicas, at most 4 each",
        () => balanced(replicas, 4),
        60_000,
        250,
      );
      const perReplica = replicas.map((r) => rebalanced.filter((id) => id === r.identity).length);
      process.stderr.write(
        `3 → 5 replicas: ${three.map((r) => spreadOf(r, threeSpread)).join(", ")} → ${perReplica.join(", ")} in ${((performance.now() - scaledAt) / 1000).toFixed(1)} s\n`,
      );
      // ceil(16/5) = 4 each: the three old replicas keep at most 12, so the new ones hold at least 4 between
      // them (4,4,4,4,0 is as fair as 4,4,4,2,2 under that rule; which one depends on who asks first).
      assert.ok(
        (perReplica[3] ?? 0) + (perReplica[4] ?? 0) >= 4,
        `the new replicas took the shards the old ones handed back: ${perReplica.join(", ")}`,
      );
      await Promise.all(
        namespaces.map((ns) =>
          env.client.patch(AppService, "app-1", { spec: { size: 1 } }, { namespace: ns, type: "merge" }),
        ),
      );
      await eventually("changes after rebalancing converge", converged, 90_000, 1_000);

      const checked = assertNoOverlap(everyone);
      process.stderr.write(`${checked} reconcile intervals, none overlapping across replicas\n`);
      killed = { identity: victim.identity, at: killedAt };
      process.stderr.write(`sharded scenario took ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
    }));

  it("client-side filtering (a server without the gate): same shards, everything received", () =>
    diagnose(async () => {
      // Graceful stops hand every shard back at once.
      await Promise.all(replicas.splice(0).map((r) => r.op.stop()));
      await eventually(
        "every shard released",
        async () => (await holders()).every((id) => id === ""),
        30_000,
      );
      const stopped = new Set(everyone.filter((r) => r.identity !== killed?.identity).map((r) => r.identity));
      assert.deepEqual(
        (await heartbeats()).filter((id) => stopped.has(id)),
        [],
        "replicas stopping cleanly delete their heartbeats",
      );
      const client = await Promise.all([
        startReplica("client"),
        startReplica("client"),
        startReplica("client"),
      ]);
      for (const r of client) assert.equal(r.mode, "client");
      await eventually("16 shards over 3 client-filtering replicas", () => balanced(client, 6), 60_000);
      await eventually("converged", converged, 60_000, 1_000);
      const figures = await touchAndMeasure(client, "2", true);
      process.stderr.write(`client-side filtering, per replica: ${JSON.stringify(figures)}\n`);
      const cached = figures.reduce((a, f) => a + f.cached, 0);
      for (const f of figures) {
        assert.ok(
          f.cached < cached && f.cached <= f.appServices * 3 + 20,
          `the cache still holds only the replica's shards: ${f.cached} of ${cached} for its ${f.appServices} AppServices`,
        );
        assert.ok(f.events >= NAMESPACES * PER_NAMESPACE, "every event reached every replica");
      }
      assertNoOverlap(everyone);
      // A live replica deletes the killed one's heartbeat once expired for 3 × the lease duration
      // (the survivors of the first scenario, or these, which start their count when they first see it).
      if (killed) {
        const { identity, at } = killed;
        const seenGone = await eventually(
          "the killed replica's heartbeat Lease is collected",
          async () => ((await heartbeats()).includes(identity) ? undefined : (performance.now() - at) / 1000),
          (LEASE_SECONDS * 4 + 20) * 1000,
          500,
        );
        process.stderr.write(
          `the killed replica's heartbeat was seen gone ${seenGone.toFixed(1)} s after the kill\n`,
        );
        const live = client.map((r) => r.identity).sort();
        assert.deepEqual(await heartbeats(), live, "one heartbeat per live replica, no other");
      }
    }));
});
