/**
 * An operator's API upgrade, end to end on a real control plane, the way a user does it with opkit:
 *
 * 1. Release 1 serves WebApp v1alpha1 (a fixture copied from the WebApp seed operator) and stores it.
 * 2. Release 2 adds v1beta1 (shorter field names and a `database` block v1alpha1 cannot express), makes it
 *    the hub and storage version, and converts through a webhook that keeps `database` in an annotation
 *    when an object is read as v1alpha1. Its conversion is proven lossless by `checkConversion` first.
 * 3. The new CRD (with its conversion webhook) is applied and the operator replaced, while a writer keeps
 *    changing objects through both versions and `kubectl get` reads both versions.
 * 4. `migrateStorage` rewrites every object in v1beta1 while the API server is restarted once; it then
 *    trims storedVersions; v1alpha1 is dropped from the CRD.
 *
 * At the end every object's data is what was last written (field by field, in v1beta1 terms), every
 * object is stored in v1beta1 (read from etcd), kubectl never failed, and the operator reconciled
 * throughout and converged on the last writes.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import * as Type from "typebox/type";
import { defineKind, defineKindVersions, type ObjectOf } from "../api/kind.ts";
import { stringEnum } from "../api/k8s.ts";
import { ConfigMaps, type ConfigMap } from "../client/builtins.ts";
import { kindRef, type KindRef, type KubeObject } from "../client/types.ts";
import { controller } from "../controller/index.ts";
import { crdFor } from "../generate/crd.ts";
import { applyOwned, updateStatusIfChanged } from "../helpers/index.ts";
import { createLogger } from "../logging/index.ts";
import { Manager } from "../manager/index.ts";
import { binDir, checkConversion, eventually, useTestEnv, type TestEnv } from "../testenv/index.ts";
import { conversion, LocalWebhooks, WebhookServer } from "../webhook/index.ts";
import { migrateStorage } from "./storage.ts";

const GROUP = "upgrade.opkit.dev";
const TIERS = ["dev", "stg", "prod"] as const;
const status = Type.Object({
  observedGeneration: Type.Optional(Type.Integer()),
  image: Type.Optional(Type.String()),
});
const v1alpha1Spec = Type.Object({
  deploymentTier: stringEnum(TIERS),
  webAppHostname: Type.String({ minLength: 1 }),
  webAppImage: Type.String({ minLength: 1 }),
  webAppReplicas: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
});
/** Release 1: the only version, stored. */
const V1alpha1 = defineKind({
  group: GROUP,
  version: "v1alpha1",
  kind: "WebApp",
  spec: v1alpha1Spec,
  status,
});
/** Release 2: still served (deprecated), no longer stored. */
const V1alpha1Served = defineKind({
  group: GROUP,
  version: "v1alpha1",
  kind: "WebApp",
  spec: v1alpha1Spec,
  status,
  storage: false,
  deprecated: true,
});
/** Release 2: the hub and storage version. */
const V1beta1 = defineKind({
  group: GROUP,
  version: "v1beta1",
  kind: "WebApp",
  storage: true,
  spec: Type.Object({
    tier: stringEnum(TIERS),
    hostname: Type.String({ minLength: 1 }),
    image: Type.String({ minLength: 1 }),
    replicas: Type.Optional(Type.Integer({ minimum: 0, maximum: 100 })),
    database: Type.Optional(
      Type.Object({ storageGi: Type.Integer({ minimum: 1, maximum: 100 }), tls: Type.Boolean() }),
    ),
  }),
  status,
});
type Old = ObjectOf<typeof V1alpha1>;
type Hub = ObjectOf<typeof V1beta1>;
type HubSpec = Hub["spec"];
const CRD_NAME = `${V1beta1.plural}.${GROUP}`;
const Crds = kindRef<KubeObject & { status?: { storedVersions?: string[] } }>(
  "apiextensions.k8s.io/v1",
  "CustomResourceDefinition",
);

const webAppConversion = conversion<Hub, [Old]>({
  hub: V1beta1,
  spokes: [
    {
      kind: V1alpha1Served,
      toHub: (o) => ({
        spec: {
          tier: o.spec.deploymentTier,
          hostname: o.spec.webAppHostname,
          image: o.spec.webAppImage,
          replicas: o.spec.webAppReplicas,
        },
        status: o.status,
      }),
      fromHub: (h) => ({
        spec: {
          deploymentTier: h.spec.tier,
          webAppHostname: h.spec.hostname,
          webAppImage: h.spec.image,
          webAppReplicas: h.spec.replicas,
        },
        status: h.status,
      }),
      hubOnly: [".spec.database"],
    },
  ],
});

const COUNT = 30;
const execFileAsync = promisify(execFile);

describe("an API upgrade: new version, conversion, storage migration, old version dropped", () => {
  let env: TestEnv;
  before(async () => {
    env = await useTestEnv();
  });
  after(async () => {
    await env.client.delete(Crds, CRD_NAME).catch(() => undefined);
    await env.cleanup();
  });

  it("keeps every object's data and the operator reconciling from release 1 to release 2", async (t) => {
    await checkConversion(webAppConversion, { numRuns: 200 });
    const client = env.client;
    const ns = await env.namespace("upgrade");
    await env.installCrds([crdFor(V1alpha1)]);

    let phase: "old" | "both" | "new" = "old";
    const expected = new Map<string, HubSpec>();
    const reconciles = { old: 0, new: 0 };
    let operator = await startOperator(
      env,
      ns,
      V1alpha1,
      (o: Old) => o.spec.webAppImage,
      () => reconciles.old++,
    );
    t.after(() => operator.stop());

    for (let i = 0; i < COUNT; i++) {
      const spec: HubSpec = {
        tier: TIERS[i % 3] ?? "dev",
        hostname: `app-${i}.example.com`,
        image: `img:r1-${i}`,
        replicas: i % 4,
      };
      await client.create(V1alpha1.new(`app-${i}`, toOld(spec), { namespace: ns }));
      expected.set(`app-${i}`, spec);
    }

    // The writer: one change every 25 ms, through whichever versions the CRD serves at the time.
    let writing = true;
    let oldWritesOverDatabase = 0;
    const writeFailures: string[] = [];
    const writer = (async () => {
      for (let n = 0; writing; n++) {
        const name = `app-${(n * 7) % COUNT}`;
        // In "both", each pass over the objects alternates the version, so every object is written through both.
        const viaOld = phase === "old" || (phase === "both" && Math.floor(n / COUNT) % 2 === 0);
        const was = expected.get(name);
        if (!was) continue;
        const next: HubSpec = { ...was, image: `img:w${n}`, replicas: n % 5 };
        // The database block is written once, through v1beta1; every later write through v1alpha1 (which
        // cannot express it) must keep it.
        const database = !viaOld && !was.database ? { storageGi: (n % 10) + 1, tls: n % 2 === 0 } : undefined;
        if (database) next.database = database;
        // Each write sends only what it changes, as a client that owns those fields does.
        try {
          if (viaOld)
            await client.patch(
              V1alpha1,
              name,
              { spec: { webAppImage: next.image, webAppReplicas: next.replicas } },
              { type: "merge", namespace: ns },
            );
          else
            await client.patch(
              V1beta1,
              name,
              { spec: { image: next.image, replicas: next.replicas, ...(database ? { database } : {}) } },
              { type: "merge", namespace: ns },
            );
          expected.set(name, next);
          if (viaOld && next.database) oldWritesOverDatabase++;
        } catch (err) {
          // not acknowledged (the API server restarting, the CRD changing): nothing to expect of it
          writeFailures.push(`${phase} ${viaOld ? "v1alpha1" : "v1beta1"}: ${(err as Error).message}`);
        }
        await new Promise((r) => setTimeout(r, 25));
      }
    })();
    // kubectl reads every version the CRD serves, every second; no read may fail, except while the API
    // server restarts and in the seconds after, while it installs the CRDs' paths again (it answers 503).
    let restartWindowUntil = 0;
    const kubectlFailures: string[] = [];
    let kubectlReads = 0;
    let reading = true;
    const reader = (async () => {
      while (reading) {
        for (const version of phase === "old"
          ? ["v1alpha1"]
          : phase === "both"
            ? ["v1alpha1", "v1beta1"]
            : ["v1beta1"]) {
          try {
            const { stdout } = await execFileAsync(join(binDir(), "kubectl"), [
              `--kubeconfig=${env.kubeconfigPath}`,
              "get",
              `${V1beta1.plural}.${version}.${GROUP}`,
              "-n",
              ns,
              "-o",
              "name",
            ]);
            if (stdout.trim().split("\n").length !== COUNT)
              kubectlFailures.push(`${version}: ${stdout.trim().split("\n").length} objects`);
            kubectlReads++;
          } catch (err) {
            if (Date.now() > restartWindowUntil)
              kubectlFailures.push(`${version}: ${(err as Error).message}`);
          }
        }
        await new Promise((r) => setTimeout(r, 1000));
      }
    })();
    const stopBackground = async () => {
      writing = false;
      reading = false;
      await Promise.all([writer, reader]);
    };
    t.after(stopBackground);
    await new Promise((r) => setTimeout(r, 2000));

    // Release 2: the conversion webhook serving, then the CRD with both versions pointing at it in one apply.
    const prepared = await LocalWebhooks.prepare();
    const server = new WebhookServer({
      handlers: [webAppConversion],
      host: prepared.host,
      port: 0,
      certDir: prepared.certDir,
      logger: createLogger({ level: "silent" }),
    });
    const local = prepared.withPort((await server.start()).port);
    t.after(async () => {
      await server.stop(0);
      await local.dispose();
    });
    const upgraded = crdFor(defineKindVersions([V1alpha1Served, V1beta1]));
    const registration = local.configurations("upgrade-test", [webAppConversion]).conversions[0];
    assert.ok(registration, "a conversion registration for the CRD");
    upgraded.spec.conversion = registration.conversion;
    await env.installCrds([upgraded]);
    phase = "both";
    await operator.stop();
    operator = await startOperator(
      env,
      ns,
      V1beta1,
      (o: Hub) => o.spec.image,
      () => reconciles.new++,
    );
    await new Promise((r) => setTimeout(r, 3000));

    // Migrate, restarting the API server once a third of the way through.
    const beforeMigration = reconciles.new;
    let restarted: Promise<void> | undefined;
    const result = await migrateStorage(client, CRD_NAME, {
      qps: 20,
      pageSize: 5,
      onProgress: (p) => {
        if (restarted || (p.method !== "in-tree" && p.migrated < COUNT / 3)) return;
        restartWindowUntil = Infinity;
        restarted = env.restart("kube-apiserver").finally(() => (restartWindowUntil = Date.now() + 15_000));
      },
    });
    await restarted;
    t.diagnostic(
      `migration (${result.method}): ${result.migrated} rewritten, ${result.conflicts} conflicts, ${(result.elapsedMs / 1000).toFixed(1)} s`,
    );
    assert.ok(restarted, "the API server was restarted during the migration");
    assert.deepEqual((await client.get(Crds, CRD_NAME)).status?.storedVersions, ["v1beta1"]);
    const stored = await env.controlPlane.stored(`/registry/${GROUP}/${V1beta1.plural}/${ns}/`);
    assert.equal(stored.length, COUNT, "no object lost");
    assert.deepEqual(
      [...new Set(stored.map((e) => (e.value as KubeObject).apiVersion))],
      [`${GROUP}/v1beta1`],
    );

    // Drop v1alpha1: now the API server accepts it.
    phase = "new";
    await new Promise((r) => setTimeout(r, 1500)); // a v1alpha1 write in flight lands first
    await env.installCrds([crdFor(V1beta1)]);
    await new Promise((r) => setTimeout(r, 3000));
    await stopBackground();

    assert.deepEqual(kubectlFailures, [], "kubectl read every served version throughout");
    assert.ok(kubectlReads >= 5, `kubectl read ${kubectlReads} times`);
    assert.ok(
      reconciles.old > 0 && reconciles.new > beforeMigration,
      "both operators reconciled, the new one during the migration too",
    );
    t.diagnostic(
      `writes through v1alpha1 over a database block: ${oldWritesOverDatabase}; failed writes: ${writeFailures.length} ${writeFailures.slice(0, 3).join(" | ")}`,
    );
    assert.ok(oldWritesOverDatabase >= 5, "objects with a database block were written through v1alpha1");
    const withDatabase = [...expected.values()].filter((spec) => spec.database).length;
    assert.equal(withDatabase, COUNT, "every object got a database block through v1beta1");
    for (const [name, spec] of expected) {
      const live = await client.get(V1beta1, name, { namespace: ns });
      assert.deepEqual(withoutUndefined(live.spec), withoutUndefined(spec), `${name}: the data last written`);
    }
    await eventually("the operator converged on the last writes", async () => {
      for (const [name, spec] of expected) {
        const live = await client.get(V1beta1, name, { namespace: ns });
        const cm = await client.get(ConfigMaps, `${name}-config`, { namespace: ns });
        assert.equal(cm.data?.image, spec.image, `${name}: the operator applied the last image`);
        assert.equal(live.status?.observedGeneration, live.metadata.generation, `${name}: status observed`);
      }
      return true;
    });
  });
});

function toOld(spec: HubSpec): Old["spec"] {
  return {
    deploymentTier: spec.tier,
    webAppHostname: spec.hostname,
    webAppImage: spec.image,
    webAppReplicas: spec.replicas,
  };
}

function withoutUndefined(v: unknown): unknown {
  return JSON.parse(JSON.stringify(v)) as unknown;
}

/** The status both releases' operators write. */
type Observed = { observedGeneration?: number; image?: string };

/** The operator of one release: a ConfigMap per WebApp with its image, and the status it observed. */
async function startOperator<
  T extends KubeObject & { status?: { observedGeneration?: number; image?: string } },
>(
  env: TestEnv,
  ns: string,
  kind: KindRef<T>,
  imageOf: (obj: T) => string,
  counted: () => void,
): Promise<Manager> {
  const mgr = await Manager.create({
    kubeconfig: env.kubeconfigPath,
    name: `upgrade-${kind.apiVersion.split("/")[1]}`,
    metrics: { host: "127.0.0.1", port: 0 },
    health: { host: "127.0.0.1", port: 0 },
    cache: { namespace: ns },
    leaderElection: false,
    gracefulShutdownMs: 5_000,
    logger: createLogger({ level: "silent" }),
  });
  mgr.add(
    controller("webapp")
      .for(kind)
      .owns(ConfigMaps)
      .reconcile(async (req, ctx) => {
        const obj = ctx.cache.get(kind, req.name, { namespace: req.namespace });
        if (!obj) return;
        counted();
        const image = imageOf(obj as T);
        await applyOwned<ConfigMap>(ctx.client, obj, {
          apiVersion: "v1",
          kind: "ConfigMap",
          metadata: { name: `${req.name}-config`, namespace: req.namespace },
          data: { image },
        });
        const observed: Observed = { observedGeneration: obj.metadata.generation, image };
        await updateStatusIfChanged<KubeObject & { status?: Observed }>(ctx.client, obj, observed);
      }),
  );
  await mgr.start();
  return mgr;
}
