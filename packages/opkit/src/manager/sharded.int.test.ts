/**
 * A sharded Manager in process, against opkit env: a replica whose shard Lease another holder takes
 * while a slow reconcile of that shard runs (and ignores its signal) stops the shard at once and writes
 * nothing for it afterwards, Events included: the new holder may already be reconciling the same key.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import { EventsV1 } from "../events/recorder.ts";
import { Leases } from "../client/builtins.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { controller } from "../controller/index.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { eventually } from "../testenv/eventually.ts";
import { takeOverLease } from "./testdata/takeover.ts";
import { createLogger } from "../logging/index.ts";
import { Manager } from "./manager.ts";
import { ShardSpace } from "../sharding/hash.ts";

const ConfigMaps = kindRef<KubeObject>("v1", "ConfigMap");
const Secrets = kindRef<KubeObject & { data?: Record<string, string> }>("v1", "Secret");

describe("sharded manager", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env?.cleanup();
  });

  it("a replica whose shard Lease is taken during a slow reconcile writes nothing for it after, Events included", async (t) => {
    const ns = await env.namespace("shard-taken");
    const client = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
    let started = 0;
    let abortedAt = 0;
    let lateWrite: unknown;
    const mgr = await Manager.create({
      client,
      name: "taken",
      logger: createLogger({ name: "taken", level: "silent" }),
      metrics: false,
      health: false,
      cache: { namespace: ns },
      gracefulShutdownMs: 10_000,
      shards: {
        count: 1,
        namespace: ns,
        name: "taken",
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        retryPeriodMs: 500,
        filtering: "client",
      },
    });
    mgr.add(
      controller("slow")
        .for(ConfigMaps)
        .reconcile(async (req, ctx) => {
          if (req.name !== "trigger") return;
          started++;
          ctx.signal.addEventListener("abort", () => (abortedAt = Date.now()), { once: true });
          const cm = ctx.cache.get(ConfigMaps, req.name, { namespace: req.namespace });
          // Ignores ctx.signal, then writes as if it still held the shard: an Event and an object.
          await new Promise((r) => setTimeout(r, 3_000));
          if (cm) await ctx.recorder.record(cm, { type: "Normal", reason: "LateWrite", action: "Reconcile" });
          await ctx.client
            .create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "late", namespace: ns } })
            .catch((err: unknown) => (lateWrite = err));
        }),
    );
    t.after(() => mgr.stop());
    await mgr.start();
    await env.client.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "trigger", namespace: ns },
    });
    await eventually("the slow reconcile started", () => started > 0, 30_000, 50);
    await takeOverLease(env.client, ns, "taken-shard-0");
    const takenAt = Date.now();
    await eventually("the reconcile's signal aborted", () => abortedAt > 0, 5_000, 20);
    t.diagnostic(`signal aborted ${abortedAt - takenAt} ms after the shard Lease was taken (retry 0.5 s)`);
    assert.ok(abortedAt - takenAt <= 500 + 1_000, "aborted within a retry period + 1 s");
    await eventually("the late create was refused", () => lateWrite !== undefined, 10_000, 50);
    await new Promise((r) => setTimeout(r, 500));
    const events = await env.client.list(EventsV1, { namespace: ns });
    assert.deepEqual(
      events.items.filter((e) => e.reason === "LateWrite").map((e) => e.note ?? e.reason),
      [],
      "no Event recorded after the shard was lost",
    );
    await assert.rejects(env.client.get(ConfigMaps, "late", { namespace: ns }), NotFoundError);
    assert.equal(started, 1, "the key was not reconciled again while another holder has the shard");
  });

  it("a uid-sharded controller still reconciles a deleted object's key once (the not-found run)", async (t) => {
    const ns = await env.namespace("shard-deleted");
    const client = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
    const runs: { name: string; found: boolean }[] = [];
    const mgr = await Manager.create({
      client,
      name: "bydel",
      logger: createLogger({ name: "bydel", level: "silent" }),
      metrics: false,
      health: false,
      cache: { namespace: ns },
      shards: {
        count: 4,
        namespace: ns,
        name: "bydel",
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        retryPeriodMs: 500,
        filtering: "client",
      },
    });
    mgr.add(
      controller("bydel")
        .for(ConfigMaps)
        .withOptions({ shardKey: "uid" })
        .reconcile((req, ctx) => {
          if (!req.name.startsWith("gone-")) return;
          runs.push({
            name: req.name,
            found: !!ctx.cache.get(ConfigMaps, req.name, { namespace: req.namespace }),
          });
        }),
    );
    t.after(() => mgr.stop());
    await mgr.start();
    const names = ["gone-a", "gone-b", "gone-c", "gone-d"];
    for (const name of names)
      await env.client.create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name, namespace: ns } });
    await eventually(
      "each reconciled while it exists",
      () => names.every((n) => runs.some((r) => r.name === n && r.found)),
      30_000,
      50,
    );
    for (const name of names) await env.client.delete(ConfigMaps, name, { namespace: ns });
    await eventually(
      "each reconciled once more after its deletion",
      () => names.every((n) => runs.some((r) => r.name === n && !r.found)),
      10_000,
      50,
    );
  });

  it("a stop whose reconcile ignores its signal ends after the grace period, keeps the shard Lease and refuses the late write", async (t) => {
    const ns = await env.namespace("shard-grace");
    const client = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
    let started = false;
    let lateWrite: unknown;
    let ended = false;
    const mgr = await Manager.create({
      client,
      name: "grace",
      logger: createLogger({ name: "grace", level: "silent" }),
      metrics: false,
      health: false,
      cache: { namespace: ns },
      gracefulShutdownMs: 1_500,
      shards: {
        count: 1,
        namespace: ns,
        name: "grace",
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        retryPeriodMs: 500,
        filtering: "client",
      },
    });
    mgr.add(
      controller("hang")
        .for(ConfigMaps)
        .reconcile(async (req, ctx) => {
          if (req.name !== "hang") return;
          started = true;
          await new Promise((r) => setTimeout(r, 6_000)); // ignores ctx.signal
          await ctx.client
            .create({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "late-hang", namespace: ns } })
            .catch((err: unknown) => (lateWrite = err));
          ended = true;
        }),
    );
    t.after(() => mgr.stop());
    await mgr.start();
    await env.client.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "hang", namespace: ns },
    });
    await eventually("the reconcile started", () => started, 30_000, 50);
    const stopAt = Date.now();
    await mgr.stop();
    const tookMs = Date.now() - stopAt;
    t.diagnostic(`stop took ${tookMs} ms (grace 1.5 s)`);
    assert.ok(
      tookMs < 1_500 + 1_500,
      `stop ended after the grace period, not with the reconcile (${tookMs} ms)`,
    );
    assert.equal(ended, false);
    // Not released while its work may still run: others wait for it to expire.
    const lease = await env.client.get(Leases, "grace-shard-0", { namespace: ns });
    assert.notEqual(lease.spec?.holderIdentity ?? "", "", "the shard Lease was released with work running");
    await eventually("the reconcile ended", () => ended, 10_000, 50);
    assert.ok(lateWrite, "the late create failed (its signal was aborted)");
    await assert.rejects(env.client.get(ConfigMaps, "late-hang", { namespace: ns }), NotFoundError);
  });

  it("a watch that maps an object in another namespace (another shard) to a parent wakes and informs the parent's holder", async (t) => {
    // Two replicas, two shards, each holds one. The parent lives in one namespace, the Secret it
    // refers to in another that hashes to the other shard: the parent's holder must see the Secret.
    const space = new ShardSpace(2);
    const nsA = await env.namespace("shard-parent");
    let nsB = await env.namespace("shard-ref");
    for (let i = 0; space.shardOf(nsB) === space.shardOf(nsA); i++) {
      assert.ok(i < 20, "no namespace in the other shard");
      nsB = await env.namespace("shard-ref");
    }
    const seen: { replica: string; value: string | undefined }[] = [];
    const replicas: Manager[] = [];
    for (const id of ["r1", "r2"]) {
      const client = await KubeClient.load({ kubeconfig: env.kubeconfigPath });
      const mgr = await Manager.create({
        client,
        name: "xns",
        logger: createLogger({ name: id, level: "silent" }),
        metrics: false,
        health: false,
        shards: {
          count: 2,
          namespace: nsA,
          name: "xns",
          identity: id,
          leaseDurationMs: 3_000,
          renewDeadlineMs: 2_000,
          retryPeriodMs: 500,
          filtering: "client",
        },
      });
      mgr.add(
        controller("xns")
          .for(ConfigMaps)
          .watches(Secrets, (secret) =>
            secret.metadata.namespace === nsB ? [{ namespace: nsA, name: "parent" }] : [],
          )
          .reconcile((req, ctx) => {
            if (req.namespace !== nsA || req.name !== "parent") return;
            const secret = ctx.cache.get(Secrets, "ref", { namespace: nsB });
            seen.push({ replica: id, value: secret?.data?.v });
          }),
      );
      replicas.push(mgr);
      t.after(() => mgr.stop());
    }
    await Promise.all(replicas.map((m) => m.start()));
    await eventually(
      "each replica holds one shard",
      async () => {
        const leases = await env.client.list(Leases, { namespace: nsA });
        const holders = leases.items
          .filter((l) => l.metadata.name?.startsWith("xns-shard-"))
          .map((l) => l.spec?.holderIdentity ?? "");
        return holders.length === 2 && new Set(holders).size === 2 && !holders.includes("");
      },
      30_000,
      200,
    );
    await env.client.create({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "parent", namespace: nsA },
    });
    await eventually("the parent reconciled", () => seen.length > 0, 30_000, 50);
    await env.client.create({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "ref", namespace: nsB },
      data: { v: Buffer.from("1").toString("base64") },
    });
    await eventually(
      "the parent's holder reconciled it with the Secret in view",
      () => seen.some((s) => s.value !== undefined),
      10_000,
      50,
    );
  });
});
