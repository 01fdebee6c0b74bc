/**
 * Manager processes against opkit env: with leader election exactly one of three replicas reconciles;
 * kill -9 of the leader hands over within lease duration + retry period and the new leader converges
 * what changed meanwhile; SIGTERM during a slow reconcile lets it finish and exits 0.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { fileURLToPath } from "node:url";
import { kindRef, type KubeObject } from "../client/types.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { eventually } from "../testenv/eventually.ts";
import { takeOverLease } from "./testdata/takeover.ts";

const script = fileURLToPath(new URL("./testdata/copy-operator.ts", import.meta.url));
const stuckScript = fileURLToPath(new URL("./testdata/stuck-sync-operator.ts", import.meta.url));
const Secrets = kindRef<KubeObject>("v1", "Secret");
const Leases = kindRef<KubeObject & { spec?: { holderIdentity?: string } }>(
  "coordination.k8s.io/v1",
  "Lease",
);

interface Replica {
  identity: string;
  child: ChildProcess;
  output: string[];
  exited: Promise<number | null>;
}

function startReplica(
  env: TestEnv,
  ns: string,
  identity: string,
  extra: Record<string, string> = {},
): Replica {
  const child = spawn(process.execPath, ["--conditions=opkit-source", script], {
    env: {
      ...process.env,
      KUBECONFIG: env.kubeconfigPath,
      NAMESPACE: ns,
      IDENTITY: identity,
      OPKIT_LOG_LEVEL: "info",
      ...extra,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const output: string[] = [];
  child.stdout?.on("data", (d: Buffer) => output.push(...d.toString().split("\n").filter(Boolean)));
  child.stderr?.on("data", (d: Buffer) => output.push(...d.toString().split("\n").filter(Boolean)));
  const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
  return { identity, child, output, exited };
}

function stopAll(replicas: Replica[]): Promise<unknown> {
  return Promise.all(
    replicas.map((r) => {
      if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill("SIGKILL");
      return r.exited;
    }),
  );
}

const sourceCm = (ns: string, name: string, data: Record<string, string>): KubeObject =>
  ({
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: { name, namespace: ns, labels: { "opkit-test/source": "true" } },
    data,
  }) as KubeObject;

async function reconciledBy(env: TestEnv, ns: string, name: string): Promise<string | undefined> {
  const s = await env.client.getOptional(Secrets, `${name}-copy`, { namespace: ns });
  return s?.metadata.annotations?.["opkit-test/reconciled-by"];
}

describe("manager processes", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env?.cleanup();
  });

  it("elects one leader among three replicas and fails over after kill -9", async (t) => {
    const ns = await env.namespace("ha");
    const replicas = ["a", "b", "c"].map((id) =>
      startReplica(env, ns, `replica-${id}`, { LEASE: "copy-operator" }),
    );
    t.after(() => stopAll(replicas));

    let leader = "";
    await eventually(
      "a lease holder",
      async () => {
        const lease = await env.client.get(Leases, "copy-operator", { namespace: ns });
        leader = lease.spec?.holderIdentity ?? "";
        return leader !== "";
      },
      60_000,
    );
    for (let i = 0; i < 5; i++) await env.client.create(sourceCm(ns, `cm-${i}`, { n: String(i) }));
    await eventually("5 copies", async () =>
      (await Promise.all([0, 1, 2, 3, 4].map((i) => reconciledBy(env, ns, `cm-${i}`)))).every(Boolean),
    );
    for (let i = 0; i < 5; i++)
      assert.equal(await reconciledBy(env, ns, `cm-${i}`), leader, "only the leader reconciles");
    for (const r of replicas.filter((x) => x.identity !== leader)) {
      assert.ok(
        !r.output.some((l) => l.includes('"reconcile-start"')),
        `${r.identity} must not reconcile while not leading`,
      );
    }

    const old = replicas.find((r) => r.identity === leader) as Replica;
    const killedAt = Date.now();
    old.child.kill("SIGKILL");
    await old.exited;
    // Changes made while nobody leads must be converged by the next leader.
    await env.client.create(sourceCm(ns, "during-failover", { n: "x" }));
    let next = "";
    await eventually(
      "a new lease holder",
      async () => {
        const lease = await env.client.get(Leases, "copy-operator", { namespace: ns });
        next = lease.spec?.holderIdentity ?? "";
        return next !== "" && next !== leader;
      },
      30_000,
    );
    const takeoverMs = Date.now() - killedAt;
    t.diagnostic(`takeover after kill -9: ${takeoverMs} ms (lease 5 s, retry 1 s)`);
    // lease duration + retry period, with client-go's retry jitter (×1.2) and polling slack.
    assert.ok(takeoverMs <= 5_000 + 2_200 + 1_500, `took over in ${takeoverMs} ms`);
    await eventually(
      "the new leader converges",
      async () => (await reconciledBy(env, ns, "during-failover")) === next,
    );
  });

  it("finishes an in-flight reconcile on SIGTERM and exits 0 within the grace period", async (t) => {
    const ns = await env.namespace("term");
    const r = startReplica(env, ns, "slow", { SLOW_MS: "3000", GRACE_MS: "10000" });
    t.after(() => stopAll([r]));
    await eventually("manager running", () => r.output.some((l) => l.includes("caches synced")), 60_000);
    await env.client.create(sourceCm(ns, "slow", { n: "1" }));
    await eventually(
      "reconcile started",
      () => r.output.some((l) => l.includes('"reconcile-start"')),
      30_000,
    );
    const sentAt = Date.now();
    r.child.kill("SIGTERM");
    const code = await r.exited;
    const tookMs = Date.now() - sentAt;
    assert.equal(code, 0, `exit code (output: ${r.output.slice(-5).join(" | ")})`);
    assert.ok(
      r.output.some((l) => l.includes('"reconcile-end"')),
      "the in-flight reconcile finished",
    );
    assert.equal(await reconciledBy(env, ns, "slow"), "slow");
    assert.ok(tookMs < 10_000, `exited in ${tookMs} ms`);
  });

  it("a leader whose Lease is taken over during a slow reconcile exits within the renew deadline + 1 s and writes nothing after", async (t) => {
    const ns = await env.namespace("takeover");
    // The reconcile ignores its signal, sleeps 6 s, then writes the copy: a write after losing the
    // Lease would race the new leader.
    const r = startReplica(env, ns, "old-leader", { LEASE: "copy-operator", SLOW_MS: "6000" });
    t.after(() => stopAll([r]));
    await eventually(
      "leading",
      async () =>
        (await env.client.get(Leases, "copy-operator", { namespace: ns }).catch(() => undefined))?.spec
          ?.holderIdentity === "old-leader",
      60_000,
    );
    await env.client.create(sourceCm(ns, "slow", { n: "1" }));
    await eventually(
      "reconcile started",
      () => r.output.some((l) => l.includes('"reconcile-start"')),
      30_000,
    );
    // Another identity takes the Lease over, as a successor would after a network partition.
    await takeOverLease(env.client, ns, "copy-operator");
    const takenAt = Date.now();
    const code = await r.exited;
    const exitMs = Date.now() - takenAt;
    t.diagnostic(`the old leader exited ${exitMs} ms after the takeover (renew deadline 4 s)`);
    assert.equal(code, 1, "losing leadership exits non-zero");
    assert.ok(exitMs <= 4_000 + 1_000, `exited within renew deadline + 1 s (took ${exitMs} ms)`);
    // The slow reconcile would have written at 6 s: nothing may appear.
    await new Promise((res) => setTimeout(res, 7_000));
    assert.equal(await reconciledBy(env, ns, "slow"), undefined, "no write after leadership was lost");
  });

  it("a standby stops at once on SIGTERM and never takes the Lease while stopping", async (t) => {
    const ns = await env.namespace("standby");
    const leader = startReplica(env, ns, "leader", { LEASE: "copy-operator" });
    t.after(() => stopAll([leader]));
    await eventually(
      "leading",
      async () =>
        (await env.client.get(Leases, "copy-operator", { namespace: ns }).catch(() => undefined))?.spec
          ?.holderIdentity === "leader",
      60_000,
    );
    const standby = startReplica(env, ns, "standby", { LEASE: "copy-operator", GRACE_MS: "30000" });
    t.after(() => stopAll([standby]));
    await eventually(
      "standby synced",
      () => standby.output.some((l) => l.includes("waiting for leadership")),
      60_000,
    );
    // Keys are queued in the standby (its informers see these) but it never ran them.
    for (let i = 0; i < 5; i++) await env.client.create(sourceCm(ns, `q-${i}`, { n: String(i) }));
    await new Promise((res) => setTimeout(res, 500));
    // The leader dies as the standby is asked to stop: a stopping standby must not take over.
    leader.child.kill("SIGKILL");
    const sentAt = Date.now();
    standby.child.kill("SIGTERM");
    const code = await standby.exited;
    const tookMs = Date.now() - sentAt;
    assert.equal(code, 0, `clean exit (output: ${standby.output.slice(-3).join(" | ")})`);
    assert.ok(tookMs < 3_000, `a standby stops at once (took ${tookMs} ms)`);
    assert.ok(!standby.output.some((l) => l.includes("became leader")), "it never led while stopping");
    const lease = await env.client.get(Leases, "copy-operator", { namespace: ns });
    assert.equal(lease.spec?.holderIdentity, "leader", "the Lease was not taken by the stopping standby");
  });

  it("SIGTERM while the caches cannot sync ends the process at once, not when the sync would time out", async (t) => {
    const ns = await env.namespace("stuck");
    const child = spawn(process.execPath, ["--conditions=opkit-source", stuckScript], {
      env: { ...process.env, KUBECONFIG: env.kubeconfigPath, NAMESPACE: ns, OPKIT_LOG_LEVEL: "info" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const r: Replica = {
      identity: "stuck",
      child,
      output: [],
      exited: new Promise((res) => child.on("exit", res)),
    };
    child.stdout.on("data", (d: Buffer) => r.output.push(...d.toString().split("\n").filter(Boolean)));
    child.stderr.on("data", (d: Buffer) => r.output.push(...d.toString().split("\n").filter(Boolean)));
    t.after(() => stopAll([r]));
    await eventually(
      "serving probes",
      () => r.output.some((l) => l.includes("serving metrics and probes")),
      60_000,
    );
    await new Promise((res) => setTimeout(res, 1_000)); // well inside the sync
    const sentAt = Date.now();
    child.kill("SIGTERM");
    const exited = await Promise.race([
      r.exited,
      new Promise((res) => setTimeout(() => res("still running"), 10_000)),
    ]);
    const tookMs = Date.now() - sentAt;
    t.diagnostic(`exited (${String(exited)}) ${tookMs} ms after SIGTERM during a sync that cannot finish`);
    assert.equal(exited, 0, `exits cleanly within 10 s (output: ${r.output.slice(-3).join(" | ")})`);
  });
});
