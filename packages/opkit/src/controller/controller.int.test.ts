/**
 * Controllers in a Manager against opkit env: convergence of 200 owners, garbage collection of
 * children, the generation predicate ignoring status writes, burst collapsing with one reconcile per key
 * at a time, error management without a hot loop, and the /metrics and /readyz endpoints.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { request } from "undici";
import { KubeClient } from "../client/client.ts";
import { NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import { applyOwned } from "../helpers/apply.ts";
import { manageError, manageSuccess, RetryTracker } from "../helpers/errors.ts";
import { getCondition } from "../helpers/conditions.ts";
import * as Type from "typebox/type";
import { defineKind, type ObjectOf } from "../api/kind.ts";
import { conditions } from "../api/k8s.ts";
import { crdFor } from "../generate/crd.ts";
import { Manager } from "../manager/manager.ts";
import { eventually } from "../testenv/eventually.ts";
import { useTestEnv, type TestEnv } from "../testenv/testing.ts";
import { controller } from "./builder.ts";
import { generationChanged } from "./predicates.ts";
import { requeueAfter, TerminalError } from "./reconcile.ts";

type ConfigMap = KubeObject & { data?: Record<string, string> };
const ConfigMaps = kindRef<ConfigMap>("v1", "ConfigMap");
const Secrets = kindRef<KubeObject & { data?: Record<string, string> }>("v1", "Secret");
const group = `g${Date.now().toString(36)}.test.opkit.dev`;
// Test kinds are defined the way operators define theirs: the CRD comes from the definition.
const Gadgets = defineKind({
  group,
  version: "v1",
  kind: "Gadget",
  spec: Type.Object({ size: Type.Integer() }),
  status: Type.Object({
    observedGeneration: Type.Optional(Type.Integer()),
    conditions: Type.Optional(conditions()),
  }),
});
type Gadget = ObjectOf<typeof Gadgets>;
const gadgetCrd = crdFor(Gadgets) as unknown as KubeObject;

async function managerFor(env: TestEnv, ns: string, client?: KubeClient): Promise<Manager> {
  return Manager.create({
    ...(client ? { client } : { kubeconfig: env.kubeconfigPath }),
    name: "ctrl-test",
    metrics: { host: "127.0.0.1", port: 0 },
    health: { host: "127.0.0.1", port: 0 },
    cache: { namespace: ns },
    leaderElection: false,
    gracefulShutdownMs: 5_000,
    logger: (await import("../logging/index.ts")).createLogger({ level: "silent" }),
  });
}

describe("controllers against opkit env", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
    await env.installCrds([gadgetCrd]);
  });
  after(async () => {
    await env?.client
      .delete(kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition"), `gadgets.${group}`)
      .catch(() => undefined);
    await env?.cleanup();
  });

  it("converges 200 labelled ConfigMaps into owned Secrets; GC removes a child with its parent; /metrics shows it", async (t) => {
    const ns = await env.namespace("converge");
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    mgr.add(
      controller("cm-secrets")
        .for(ConfigMaps)
        .owns(Secrets)
        .withOptions({ maxConcurrent: 4 })
        .reconcile(async (req, ctx) => {
          const cm = ctx.cache.get(ConfigMaps, req.name, { namespace: req.namespace });
          if (!cm || cm.metadata.labels?.copy !== "yes") return;
          await applyOwned(
            ctx.client,
            cm,
            {
              apiVersion: "v1",
              kind: "Secret",
              metadata: { name: `${req.name}-secret`, namespace: req.namespace },
              stringData: cm.data ?? {},
            } as KubeObject,
            { fieldManager: "cm-secrets" },
          );
        }),
    );
    await mgr.start();
    const names = Array.from({ length: 200 }, (_, i) => `cm-${i}`);
    for (let i = 0; i < names.length; i += 25) {
      await Promise.all(
        names.slice(i, i + 25).map((name) =>
          env.client.create<ConfigMap>({
            apiVersion: "v1",
            kind: "ConfigMap",
            metadata: { name, namespace: ns, labels: { copy: "yes" } },
            data: { v: name },
          }),
        ),
      );
    }
    await eventually(
      "200 Secrets",
      async () => {
        const s = await env.client.listAll(Secrets, { namespace: ns });
        return s.items.filter((x) => x.metadata.name?.endsWith("-secret")).length === 200;
      },
      120_000,
    );

    await env.client.delete(ConfigMaps, "cm-7", { namespace: ns });
    await eventually("child collected with its parent", async () => {
      try {
        await env.client.get(Secrets, "cm-7-secret", { namespace: ns });
        return false;
      } catch (err) {
        return err instanceof NotFoundError;
      }
    });

    const metrics = await (await request(`http://127.0.0.1:${mgr.ports.metrics}/metrics`)).body.text();
    const success = Number(
      /controller_runtime_reconcile_total\{controller="cm-secrets",result="success"\} (\d+)/.exec(
        metrics,
      )?.[1],
    );
    assert.ok(success >= 200, `reconcile_total success = ${success}`);
    assert.match(metrics, /workqueue_adds_total\{[^}]*name="cm-secrets"[^}]*\} \d+/);
    assert.match(metrics, /controller_runtime_reconcile_time_seconds_count\{controller="cm-secrets"\} \d+/);
    assert.match(metrics, /rest_client_requests_total\{[^}]*code="200"[^}]*\} [1-9]\d*/);
    assert.match(metrics, /controller_runtime_max_concurrent_reconciles\{controller="cm-secrets"\} 4/);
    assert.match(metrics, /process_resident_memory_bytes \d+/);
  });

  it("a map function finds the keys an event wakes through a cache index", async (t) => {
    const ns = await env.namespace("mapindex");
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    // Which ConfigMaps name a Secret in data.secret: the lookup a map function makes per Secret event.
    mgr.cache.indexField(ConfigMaps, "secret", (cm) => (cm.data?.secret ? [cm.data.secret] : []));
    const seen: string[] = [];
    mgr.add(
      controller("by-secret")
        .for(ConfigMaps)
        .watches(Secrets, (secret, { cache }) =>
          cache
            .list(ConfigMaps, {
              namespace: secret.metadata.namespace,
              index: { name: "secret", value: secret.metadata.name ?? "" },
            })
            .map((cm) => ({ namespace: cm.metadata.namespace, name: cm.metadata.name ?? "" })),
        )
        .reconcile((req) => {
          seen.push(req.name);
          return Promise.resolve();
        }),
    );
    for (const [name, secret] of [
      ["uses-s1-a", "s1"],
      ["uses-s1-b", "s1"],
      ["uses-s2", "s2"],
    ] as const)
      await env.client.create<ConfigMap>({
        apiVersion: "v1",
        kind: "ConfigMap",
        metadata: { name, namespace: ns },
        data: { secret },
      });
    await mgr.start();
    await eventually("the first reconciles", () =>
      ["uses-s1-a", "uses-s1-b", "uses-s2"].every((n) => seen.includes(n)),
    );
    await new Promise((r) => setTimeout(r, 500));
    seen.length = 0;
    await env.client.create({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "s1", namespace: ns },
      stringData: { k: "v" },
    } as KubeObject);
    await eventually("both ConfigMaps naming s1 reconciled", () =>
      ["uses-s1-a", "uses-s1-b"].every((n) => seen.includes(n)),
    );
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(
      !seen.includes("uses-s2"),
      `a ConfigMap naming another Secret stays asleep: ${seen.join(", ")}`,
    );
  });

  it("ignores its own status writes with the generation predicate; collapses a burst; never runs a key twice at once", async (t) => {
    const ns = await env.namespace("gen");
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    const reconciles = new Map<string, number>();
    const inFlight = new Map<string, number>();
    let overlap = 0;
    mgr.add(
      controller("gadgets")
        .for(Gadgets, { predicates: [generationChanged()] })
        .withOptions({ maxConcurrent: 4 })
        .reconcile(async (req, ctx) => {
          reconciles.set(req.name, (reconciles.get(req.name) ?? 0) + 1);
          inFlight.set(req.name, (inFlight.get(req.name) ?? 0) + 1);
          if ((inFlight.get(req.name) ?? 0) > 1) overlap++;
          try {
            await new Promise((r) => setTimeout(r, 30));
            const g = ctx.cache.get(Gadgets, req.name, { namespace: req.namespace });
            if (!g) return;
            await ctx.client.patch(
              Gadgets,
              req.name,
              { status: { observedGeneration: g.metadata.generation } },
              {
                namespace: req.namespace,
                type: "merge",
                subresource: "status",
              },
            );
          } finally {
            inFlight.set(req.name, (inFlight.get(req.name) ?? 1) - 1);
          }
        }),
    );
    await mgr.start();
    const gadget = (name: string, size: number): Gadget => ({
      apiVersion: `${group}/v1`,
      kind: "Gadget",
      metadata: { name, namespace: ns },
      spec: { size },
    });
    await env.client.create(gadget("quiet", 1));
    await eventually(
      "status written",
      async () =>
        (await env.client.get(Gadgets, "quiet", { namespace: ns })).status?.observedGeneration === 1,
    );
    await new Promise((r) => setTimeout(r, 1_500));
    assert.equal(reconciles.get("quiet"), 1, "the status write did not trigger another reconcile");

    await env.client.create(gadget("busy", 1));
    for (let i = 2; i <= 101; i++) {
      await env.client.patch(Gadgets, "busy", { spec: { size: i } }, { namespace: ns, type: "merge" });
    }
    await eventually(
      "last generation observed",
      async () =>
        (await env.client.get(Gadgets, "busy", { namespace: ns })).status?.observedGeneration === 101,
    );
    const n = reconciles.get("busy") ?? 0;
    t.diagnostic(`101 spec writes → ${n} reconciles`);
    assert.ok(n < 60, `far fewer reconciles than updates (got ${n})`);
    assert.equal(overlap, 0, "a key is never reconciled by two workers at once");
  });

  it("answers a bad object with a condition, a Warning Event and a growing requeue — no hot loop", async (t) => {
    const ns = await env.namespace("bad");
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    const retries = new RetryTracker({ baseMs: 400 });
    const times: number[] = [];
    mgr.add(
      controller("validator")
        .for(Gadgets, { predicates: [generationChanged()] })
        .reconcile(async (req, ctx) => {
          const g = ctx.cache.get(Gadgets, req.name, { namespace: req.namespace });
          if (!g) return;
          times.push(Date.now());
          const mctx = { client: ctx.client, recorder: ctx.recorder, retries };
          if ((g.spec?.size ?? 0) > 10) {
            const delay = await manageError(
              mctx,
              g,
              new TerminalError(`spec.size ${g.spec?.size} is above the limit 10: lower it`),
            );
            return requeueAfter(delay);
          }
          await manageSuccess(mctx, g);
        }),
    );
    await mgr.start();
    await env.client.create({
      apiVersion: `${group}/v1`,
      kind: "Gadget",
      metadata: { name: "huge", namespace: ns },
      spec: { size: 99 },
    });
    await new Promise((r) => setTimeout(r, 4_000));
    const g = await env.client.get(Gadgets, "huge", { namespace: ns });
    const ready = getCondition(g.status?.conditions, "Ready");
    assert.equal(ready?.status, "False");
    assert.match(ready?.message ?? "", /spec.size 99 is above the limit 10/);
    const events = await env.client.list(
      kindRef<KubeObject & { type?: string; note?: string; regarding?: { name?: string } }>(
        "events.k8s.io/v1",
        "Event",
      ),
      { namespace: ns },
    );
    assert.ok(
      events.items.some((e) => e.type === "Warning" && e.regarding?.name === "huge"),
      "a Warning Event",
    );
    // 400 ms doubling: reconciles at about 0, 0.4, 1.2, 2.8 s — a handful in 4 s, with growing gaps.
    assert.ok(times.length >= 3 && times.length <= 6, `reconciles in 4 s: ${times.length}`);
    const gaps = times.slice(1).map((x, i) => x - (times[i] as number));
    // Compared end to end, not pairwise: one slow API call on a loaded machine must not fail the test.
    assert.ok((gaps.at(-1) as number) >= 2.5 * (gaps[0] as number), `gaps grow: ${gaps.join(", ")} ms`);

    await env.client.patch(Gadgets, "huge", { spec: { size: 5 } }, { namespace: ns, type: "merge" });
    await eventually(
      "Ready after the fix",
      async () =>
        getCondition((await env.client.get(Gadgets, "huge", { namespace: ns })).status?.conditions, "Ready")
          ?.status === "True",
    );
  });

  it("reports /readyz 503 while caches cannot sync, 200 once they do", async (t) => {
    const ns = await env.namespace("ready");
    const { proxy, kubeConfig } = await env.apiserverProxy();
    proxy.partition();
    const client = await KubeClient.fromConfig(kubeConfig);
    // The REST mapping needs discovery: resolve it before the partition matters.
    proxy.heal();
    await client.mapping(ConfigMaps);
    proxy.partition();
    const mgr = await managerFor(env, ns, client);
    mgr.add(
      controller("noop")
        .for(ConfigMaps)
        .reconcile(() => undefined),
    );
    const started = mgr.start();
    t.after(async () => {
      proxy.heal();
      await started.catch(() => undefined);
      await mgr.stop();
      await proxy.close();
    });
    await eventually("health server up", () => mgr.ports.health);
    const r1 = await request(`http://127.0.0.1:${mgr.ports.health}/readyz`);
    const body = await r1.body.text();
    assert.equal(r1.statusCode, 503);
    assert.match(body, /informers/);
    assert.equal((await request(`http://127.0.0.1:${mgr.ports.health}/healthz`)).statusCode, 200);
    proxy.heal();
    await started;
    const r2 = await request(`http://127.0.0.1:${mgr.ports.health}/readyz`);
    assert.equal(r2.statusCode, 200);
    await r2.body.text();
  });

  it("aborts a reconcile that exceeds its timeout and retries it", async (t) => {
    const ns = await env.namespace("timeout");
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    const calls: { aborted: boolean }[] = [];
    mgr.add(
      controller("slowpoke")
        .for(ConfigMaps)
        .withOptions({ reconcileTimeoutMs: 300 })
        .reconcile(async (req, ctx) => {
          if (req.name !== "hang") return;
          const call = { aborted: false };
          calls.push(call);
          if (calls.length > 1) return; // the retry succeeds
          await new Promise<void>((resolve) =>
            ctx.signal.addEventListener("abort", () => {
              call.aborted = true;
              resolve();
            }),
          );
        }),
    );
    await mgr.start();
    await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "hang", namespace: ns },
    });
    await eventually("a retry after the timeout", () => calls.length >= 2, 10_000);
    assert.equal(calls[0]?.aborted, true, "the timed-out reconcile saw its signal abort");
    const metrics = await (await request(`http://127.0.0.1:${mgr.ports.metrics}/metrics`)).body.text();
    assert.match(metrics, /controller_runtime_reconcile_errors_total\{controller="slowpoke"\} [1-9]/);
  });

  it("a reconcile that outlives its timeout and ignores the abort never overlaps with itself", async (t) => {
    const ns = await env.namespace("overlap");
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    let running = 0;
    let maxRunning = 0;
    let runs = 0;
    mgr.add(
      controller("stubborn")
        .for(ConfigMaps)
        .withOptions({ maxConcurrent: 4, reconcileTimeoutMs: 100 })
        .reconcile(async (req) => {
          if (req.name !== "one") return;
          runs++;
          running++;
          maxRunning = Math.max(maxRunning, running);
          // Ignores ctx.signal on purpose and runs ten times past its deadline.
          await new Promise((r) => setTimeout(r, 1_000));
          running--;
        }),
    );
    await mgr.start();
    await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "one", namespace: ns },
    });
    // Keep waking the key while runs overrun their deadline.
    for (let i = 0; i < 20; i++) {
      await env.client.patch(ConfigMaps, "one", { data: { i: String(i) } }, { namespace: ns, type: "merge" });
      await new Promise((r) => setTimeout(r, 150));
    }
    await eventually("several runs", () => runs >= 3, 20_000);
    assert.equal(maxRunning, 1, `one key ran ${maxRunning} times at once`);
    const metrics = await (await request(`http://127.0.0.1:${mgr.ports.metrics}/metrics`)).body.text();
    assert.match(
      metrics,
      /controller_runtime_reconcile_errors_total\{controller="stubborn"\} [1-9]/,
      "overruns count as errors",
    );
  });

  it("a reconcile reading a kind whose cache has not synced is requeued once it has, and never sees 'not found'", async (t) => {
    const ns = await env.namespace("unsynced");
    await env.client.create<KubeObject>({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "referenced", namespace: ns },
    });
    const mgr = await managerFor(env, ns);
    t.after(() => mgr.stop());
    const seen: string[] = [];
    mgr.add(
      controller("lazy-reader")
        .for(ConfigMaps)
        .reconcile((req, ctx) => {
          if (req.name !== "c") return;
          // Secrets are not among this controller's watches: the first read starts their informer.
          const s = ctx.cache.get(Secrets, "referenced", { namespace: req.namespace });
          seen.push(s ? "found" : "not found");
        }),
    );
    await mgr.start();
    await env.client.create<ConfigMap>({
      apiVersion: "v1",
      kind: "ConfigMap",
      metadata: { name: "c", namespace: ns },
    });
    await eventually("the reconcile after the sync", () => seen.length >= 1, 20_000);
    assert.deepEqual(seen, ["found"], "the only completed read found the existing Secret");
    const metrics = await (await request(`http://127.0.0.1:${mgr.ports.metrics}/metrics`)).body.text();
    assert.match(
      metrics,
      /controller_runtime_reconcile_errors_total\{controller="lazy-reader"\} 0/,
      "not a failure",
    );
    assert.match(
      metrics,
      /controller_runtime_reconcile_total\{controller="lazy-reader",result="requeue"\} [1-9]/,
    );
  });

  it("runs runnables with the manager: everywhere ones at once, leader ones only while leading", async (t) => {
    const ns = await env.namespace("runnables");
    const log: string[] = [];
    const runnable = (name: string, needLeaderElection: boolean) => ({
      name,
      needLeaderElection,
      start: (signal: AbortSignal) =>
        new Promise<void>((resolve) => {
          log.push(`${name} started`);
          signal.addEventListener("abort", () => {
            log.push(`${name} stopped`);
            resolve();
          });
        }),
    });
    // A foreign holder keeps the Lease for a while, so this manager is a standby at first.
    const now = new Date().toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
    await env.client.create({
      apiVersion: "coordination.k8s.io/v1",
      kind: "Lease",
      metadata: { name: "runnables", namespace: ns },
      spec: { holderIdentity: "someone-else", leaseDurationSeconds: 3, renewTime: now, acquireTime: now },
    });
    const mgr = await Manager.create({
      kubeconfig: env.kubeconfigPath,
      name: "runnables-test",
      metrics: false,
      health: false,
      leaderElection: {
        name: "runnables",
        namespace: ns,
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        retryPeriodMs: 500,
      },
      logger: (await import("../logging/index.ts")).createLogger({ level: "silent" }),
    });
    t.after(() => mgr.stop());
    mgr.add(runnable("webhook-like", false)).add(runnable("poller", true));
    await mgr.start();
    assert.deepEqual(
      log,
      ["webhook-like started"],
      "only the runnable that needs no leadership runs on a standby",
    );
    await eventually(
      "leadership after the foreign Lease expires",
      () => log.includes("poller started"),
      20_000,
    );
    await mgr.stop();
    assert.deepEqual(log.slice(-2).sort(), ["poller stopped", "webhook-like stopped"]);
  });
});
