/**
 * Fault tests on the AppService operator (seed 001), run as its own process under its generated RBAC,
 * its connections to the API server going through a local TCP proxy so the network can fail too. One
 * namespace of AppServices (size 0: the load is the operator's, not kwok's) carries every test:
 * - kube-apiserver restarted while N AppServices converge → all converge, exactly one Deployment and one
 *   Service each, owned by it;
 * - etcd compacted (and the API server restarted, so watches resume into 410 Gone) during churn → every
 *   change made during the churn converges (the caches equal live state);
 * - watch connections cut during churn, then frozen → every change converges, the watches reopen, and the
 *   frozen ones are noticed within a minute (the reflector's 50 s progress deadline);
 * - a second client rewriting Deployment replicas in a loop → the spec is restored, with the operator's
 *   reconciles bounded by the fighter's writes and at most 3 writes a reconcile;
 * - the leader's Lease taken over under churn → the old leader exits at once, the standby takes over and
 *   converges what changed.
 * Each test prints one `FAULT ...` line: load, faults injected, objects lost, duration.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { ConflictError, Deployments, Leases } from "opkit";
import {
  operatorProject,
  sleep,
  useTestEnv,
  type OperatorProcess,
  type OperatorProject,
  type TcpProxy,
  type TestEnv,
} from "opkit/testenv";
import {
  churn,
  converged,
  createAppServices,
  kubeconfigThrough,
  metrics,
  metricsPort,
  persist,
  report,
  scaled,
  total,
  writes,
  type Wanted,
} from "./harness.ts";

const root = fileURLToPath(new URL("../operators/appservice", import.meta.url));
describe("faults: the AppService operator", { timeout: 600_000 }, () => {
  let env: TestEnv;
  let project: OperatorProject;
  let proxy: TcpProxy;
  let kubeconfig: string;
  let ns: string;
  let op: OperatorProcess;
  let port: number;
  let wanted = new Map<string, Wanted>();

  before(async () => {
    env = await useTestEnv();
    project = await operatorProject(env, root, { namespace: "fault-appsvc" });
    ns = project.namespace;
    proxy = (await env.apiserverProxy()).proxy;
    kubeconfig = await kubeconfigThrough(project.session.kubeconfigPath, proxy.port);
    op = await project.start([`--namespace=${ns}`], { kubeconfig });
    port = metricsPort(await op.waitForLine(/serving metrics and probes/));
  });
  after(async () => {
    await project?.cleanup();
    await proxy?.close();
    await env?.cleanup();
  });

  /** The operator must still be the process we started: a crash is a failure of its own. */
  const alive = async (what: string) =>
    assert.equal(await hasExited(op), false, `${what}: the operator exited:\n${op.tail()}`);

  it("kube-apiserver restarted during the convergence of N AppServices: all converge, no duplicate children", async () => {
    const startedAt = Date.now();
    const n = scaled(100);
    let restart: Promise<void> | undefined;
    wanted = await createAppServices(env.client, ns, "app", n, (done) => {
      // Half-way through the creations, while the operator is busy with the first half.
      if (done === Math.floor(n / 2)) restart = env.restart("kube-apiserver");
    });
    await restart;
    await converged(env.client, ns, wanted, "after the apiserver restart", 240_000);
    await alive("apiserver restart");
    report("apiserver-restart", {
      load: `${n} AppServices created`,
      faults: "1 kube-apiserver restart mid-convergence",
      lost: 0,
      startedAt,
    });
  });

  it("etcd compacted during churn (watches get 410): every change converges", async () => {
    const startedAt = Date.now();
    const before = await metrics(port);
    const compactions = (async () => {
      await sleep(4_000);
      await env.compact();
    })();
    const changes = await churn(env.client, ns, wanted, { durationMs: 10_000, perSecond: 10 });
    await compactions;
    await converged(env.client, ns, wanted, "after the compactions", 180_000);
    await alive("compaction");
    const afterM = await metrics(port);
    const relists =
      total(afterM, "opkit_informer_relists_total") - total(before, "opkit_informer_relists_total");
    report("etcd-compaction", {
      load: `${changes} changes over ${wanted.size} AppServices in 10 s`,
      faults: "1 etcd compaction with an apiserver restart",
      lost: 0,
      startedAt,
      extra: `relists=${relists}`,
    });
    assert.ok(relists >= 1, `the compaction made the informers relist (410 Gone): ${relists}`);
  });

  it("watch connections cut and frozen through a proxy during churn: every change converges, the freeze is noticed", async () => {
    const startedAt = Date.now();
    const restarts = async () => total(await metrics(port), "opkit_informer_watch_restarts_total");
    const before = await restarts();
    const cuts = (async () => {
      for (let i = 0; i < 3; i++) {
        await sleep(2_500);
        proxy.dropAll();
      }
    })();
    const changes = await churn(env.client, ns, wanted, { durationMs: 8_000, perSecond: 10 });
    await cuts;
    await converged(env.client, ns, wanted, "after the cut connections", 120_000);
    const afterCuts = await restarts();
    assert.ok(afterCuts - before >= 3, `each cut reopened the watches: ${afterCuts - before} restarts`);

    // Frozen: the sockets stay open and carry nothing. Only the progress deadline can notice it: a healthy
    // watch ends by its 40 s server timeout, so 50 s of silence means a dead connection. Noticed = the
    // operator closed every frozen connection (watches and pooled ones alike).
    proxy.freezeAll();
    const frozenAt = Date.now();
    const frozenChanges = churn(env.client, ns, wanted, { durationMs: 2_000, perSecond: 5 });
    let noticedS = Infinity;
    while (Date.now() - frozenAt < 120_000) {
      await sleep(500);
      if (proxy.frozen === 0) {
        noticedS = (Date.now() - frozenAt) / 1000;
        break;
      }
    }
    await frozenChanges;
    await converged(env.client, ns, wanted, "after the frozen connections", 120_000);
    const convergedS = (Date.now() - frozenAt) / 1000;
    const frozen = `freeze noticed after ${noticedS.toFixed(1)} s, converged after ${convergedS.toFixed(1)} s`;
    assert.ok(noticedS <= 60, `the frozen watches were noticed within a minute (${frozen})`);
    await alive("cut and frozen connections");
    report("cut-and-frozen-watches", {
      load: `${changes} changes over ${wanted.size} AppServices`,
      faults: "3 cuts of every connection, 1 freeze of every connection",
      lost: 0,
      startedAt,
      extra: `watch restarts=${(await restarts()) - before}; ${frozen}`,
    });
  });

  it("a second client fighting the operator over Deployment replicas: the spec is restored with bounded traffic", async () => {
    const startedAt = Date.now();
    const targets = [...wanted.keys()].slice(0, 5);
    const before = await metrics(port);
    // Every change of a Deployment's spec bumps its generation: the fighter's and the operator's reverts.
    const generations = async (): Promise<number> => {
      let sum = 0;
      for (const name of targets)
        sum += (await env.client.get(Deployments, name, { namespace: ns })).metadata.generation ?? 0;
      return sum;
    };
    const generationsBefore = await generations();
    const fightMs = 10_000;
    let fighterWrites = 0;
    const end = Date.now() + fightMs;
    while (Date.now() < end) {
      const name = targets[fighterWrites % targets.length] as string;
      await persist(`fight ${name}`, () =>
        env.client.patch(Deployments, name, { spec: { replicas: 3 } }, { type: "merge", namespace: ns }),
      );
      fighterWrites++;
      await sleep(100);
    }
    await converged(env.client, ns, wanted, "after the fight", 60_000);
    const afterFight = await metrics(port);
    const specChanges = (await generations()) - generationsBefore;
    // Then quiet: status follows the Deployments while their pods go away, then nothing more is
    // written (a hot loop would keep writing).
    let settled = afterFight;
    let quiet: typeof afterFight | undefined;
    const settleBy = Date.now() + 30_000;
    while (!quiet && Date.now() < settleBy) {
      await sleep(3_000);
      const now = await metrics(port);
      if (writes(now) === writes(settled)) quiet = now;
      settled = now;
    }
    const opWrites = writes(afterFight) - writes(before);
    const opRequests =
      total(afterFight, "rest_client_requests_total") - total(before, "rest_client_requests_total");
    const seconds = (Date.now() - startedAt) / 1000;
    const reconciles =
      total(afterFight, "controller_runtime_reconcile_total") -
      total(before, "controller_runtime_reconcile_total");
    const settleWrites = writes(settled) - writes(afterFight);
    const deploymentEvents =
      total(afterFight, "opkit_informer_received_total", { kind: /^Deployment\./ }) -
      total(before, "opkit_informer_received_total", { kind: /^Deployment\./ });
    await alive("fighter");
    report("replica-fighter", {
      load: `${fighterWrites} fighter writes on ${targets.length} Deployments in ${fightMs / 1000} s`,
      faults: "a second client rewriting spec.replicas every 100 ms",
      lost: 0,
      startedAt,
      extra: `operator requests=${opRequests} (${(opRequests / seconds).toFixed(1)}/s), writes=${opWrites} in ${reconciles} reconciles on ${deploymentEvents} Deployment events, ${specChanges} spec changes, then ${settleWrites} status writes while the pods went, then ${quiet ? "quiet" : "STILL WRITING"}`,
    });
    // No loop of the operator's own writes on the spec (an apply that never settles): it reverts each of
    // the fighter's writes once, so the spec changes at most twice per fighter write, whatever the timing.
    assert.ok(
      specChanges <= 2 * fighterWrites + 10,
      `${specChanges} spec changes for ${fighterWrites} fighter writes: at most the write and its revert each`,
    );
    // No requeue loop: every reconcile follows a change of a Deployment (the fighter's, the operator's own
    // revert, or the Deployment controller's status updates as pods come and go; the AppService's own
    // status writes pass no predicate), and events coalesce per key, so there are at most as many
    // reconciles as Deployment events. How many coalesce depends on timing (with HTTP/2 watches events
    // came in bursts, 124 reconciles on 765 events; with HTTP/1.1, 519 on 647), so the bound is the
    // events, not the fighter's writes. A loop through the server (a write whose event brings another
    // write) keeps reconciles near events: the spec bound above and the quiet after the fight catch it.
    assert.ok(
      reconciles <= deploymentEvents + 20,
      `reconciles ${reconciles} bounded by the Deployment events ${deploymentEvents} + 20`,
    );
    // Each reconcile writes at most its two children (server-side apply) and its status.
    assert.ok(opWrites <= 3 * reconciles, `writes ${opWrites} ≤ 3 per reconcile (${reconciles} reconciles)`);
    assert.ok(quiet, `no write-free 3 s within 30 s of the fight's end: ${settleWrites} writes (a hot loop)`);
  });

  it("the leader's Lease taken over under churn: the old leader stops at once, the new one converges", async () => {
    const startedAt = Date.now();
    await op.stop();
    const le = { env: { POD_NAMESPACE: ns } };
    const first = await project.start([`--namespace=${ns}`, "--leader-elect"], le);
    await first.waitForLine(/became leader/);
    const second = await project.start([`--namespace=${ns}`, "--leader-elect"], le);
    await second.waitForLine(/waiting for leadership/);
    let exitMs = NaN;
    const takeover = (async () => {
      await sleep(4_000);
      // The leader renews every 2 s: take the Lease over from the version just read, again on a conflict.
      for (;;) {
        const lease = await env.client.get(Leases, "appservice", { namespace: ns });
        const now = new Date().toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
        try {
          await env.client.update({
            ...lease,
            spec: {
              ...lease.spec,
              holderIdentity: "intruder",
              renewTime: now,
              acquireTime: now,
              leaseDurationSeconds: 2,
            },
          });
          break;
        } catch (err) {
          if (!(err instanceof ConflictError)) throw err;
        }
      }
      const at = Date.now();
      await first.exited;
      exitMs = Date.now() - at;
    })();
    const changes = await churn(env.client, ns, wanted, { durationMs: 10_000, perSecond: 10 });
    await takeover;
    await second.waitForLine(/became leader/, 60_000);
    await converged(env.client, ns, wanted, "after the takeover", 120_000);
    report("lease-takeover", {
      load: `${changes} changes over ${wanted.size} AppServices in 10 s`,
      faults: "the leader's Lease taken over by another identity",
      lost: 0,
      startedAt,
      extra: `old leader exited ${exitMs} ms after the takeover`,
    });
    assert.notEqual(await first.exited, 0, "losing leadership exits non-zero");
    // It notices at its next renewal (retry period 2 s).
    assert.ok(exitMs <= 4_000, `the old leader stopped within 4 s (took ${exitMs} ms)`);
    await second.stop();
  });
});

/** Whether the process has exited by now (without waiting for it to). */
function hasExited(op: OperatorProcess): Promise<boolean> {
  return Promise.race([op.exited.then(() => true), sleep(0).then(() => false)]);
}
