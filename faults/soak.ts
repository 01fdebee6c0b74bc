/**
 * `make soak` (not in CI): SOAK_MINUTES (default 30) of churn on the AppService operator (through a
 * fault proxy) and the AcmeNamespace operator, each as its own process under its generated RBAC, with one
 * fault a minute in turn: kube-apiserver restart, etcd compaction, every connection cut, every connection
 * frozen. After each minute every AppService change must have converged and every AcmeNamespace be
 * Created; the RSS and heap of each operator are printed. Fails on any lost update, or when memory keeps
 * growing (the late minimum above the early minimum by more than SOAK_GROWTH_MIB, default 64).
 * Uses OPKIT_TEST_ENV when set, else starts its own env.
 */
import { after, before, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { type KubeObject } from "opkit";
import {
  operatorProject,
  sleep,
  useTestEnv,
  type OperatorProcess,
  type OperatorProject,
  type TcpProxy,
  type TestEnv,
} from "opkit/testenv";
import { AcmeNamespace } from "../operators/acme-namespace/src/api/v1alpha1/acmenamespace.ts";
import {
  churn,
  converged,
  createAppServices,
  kubeconfigThrough,
  metrics,
  metricsPort,
  persist,
  report,
  rssMiB,
  total,
  type Wanted,
} from "./harness.ts";

const MINUTES = Number(process.env.SOAK_MINUTES ?? "30");
const GROWTH_MIB = Number(process.env.SOAK_GROWTH_MIB ?? "64");
const APPSERVICES = Number(process.env.SOAK_APPSERVICES ?? "200");
const appRoot = fileURLToPath(new URL("../operators/appservice", import.meta.url));
const acmeRoot = fileURLToPath(new URL("../operators/acme-namespace", import.meta.url));

let env: TestEnv;
let apps: OperatorProject;
let acme: OperatorProject;
let proxy: TcpProxy;
const acmeNames: string[] = [];

before(async () => {
  env = await useTestEnv();
  apps = await operatorProject(env, appRoot, { namespace: "soak-appsvc" });
  acme = await operatorProject(env, acmeRoot, { namespace: "soak-acme" });
  proxy = (await env.apiserverProxy()).proxy;
});
after(async () => {
  for (const name of acmeNames) {
    await env.client.delete(AcmeNamespace, name).catch(() => undefined);
    await env.client
      .patch(AcmeNamespace, name, { metadata: { finalizers: null } }, { type: "merge" })
      .catch(() => undefined);
  }
  await apps?.cleanup();
  await acme?.cleanup();
  await proxy?.close();
  await env?.cleanup();
});

interface Sample {
  minute: number;
  rss: Record<string, number>;
  heap: Record<string, number>;
}

it(
  `soak: ${MINUTES} minutes of churn and faults across the seed operators`,
  { timeout: (MINUTES + 10) * 60_000 },
  async () => {
    const startedAt = Date.now();
    const ns = apps.namespace;
    const kubeconfig = await kubeconfigThrough(apps.session.kubeconfigPath, proxy.port);
    const appOp = await apps.start([`--namespace=${ns}`], { kubeconfig });
    const acmeOp = await acme.start(["--webhook-bind-address=0"]);
    const ops: Record<string, [OperatorProcess, number]> = {
      appservice: [appOp, metricsPort(await appOp.waitForLine(/serving metrics and probes/))],
      "acme-namespace": [acmeOp, metricsPort(await acmeOp.waitForLine(/serving metrics and probes/))],
    };
    const wanted: Map<string, Wanted> = await createAppServices(env.client, ns, "soak", APPSERVICES);
    await converged(env.client, ns, wanted, "the initial AppServices", 300_000);

    const faults = ["kube-apiserver restart", "etcd compaction", "cut connections", "frozen connections"];
    const prefix = `soak-${randomBytes(2).toString("hex")}`;
    const samples: Sample[] = [];
    let changes = 0;
    let injected = 0;
    for (let minute = 1; minute <= MINUTES; minute++) {
      const fault = faults[(minute - 1) % faults.length] as string;
      const injecting = (async () => {
        await sleep(20_000);
        if (fault === "kube-apiserver restart") await env.restart("kube-apiserver");
        else if (fault === "etcd compaction") await env.compact();
        else if (fault === "cut connections") proxy.dropAll();
        else proxy.freezeAll();
        injected++;
      })();
      // AcmeNamespaces: two new ones a minute, the oldest deleted once there are more than six.
      for (let i = 0; i < 2; i++) {
        const name = `${prefix}-${minute}-${i}`;
        acmeNames.push(name);
        await persist(`create ${name}`, () =>
          env.client.create({
            apiVersion: AcmeNamespace.apiVersion,
            kind: "AcmeNamespace",
            metadata: { name },
            spec: { namespaceName: `${name}-ns`, adminUsername: "kim", deploymentTier: "dev" },
          } as KubeObject),
        );
      }
      while (acmeNames.length > 6) {
        const old = acmeNames.shift() as string;
        await persist(`delete ${old}`, () => env.client.delete(AcmeNamespace, old));
      }
      changes += await churn(env.client, ns, wanted, { durationMs: 45_000, perSecond: 5 });
      await injecting;
      // A frozen watch is noticed after the progress deadline (50 s): allow for it.
      await converged(env.client, ns, wanted, `minute ${minute} (${fault})`, 150_000);
      await persistCreated(env, acmeNames, 120_000);
      const sample: Sample = { minute, rss: {}, heap: {} };
      for (const [name, [op, port]] of Object.entries(ops)) {
        const exited = await Promise.race([op.exited.then(() => true), sleep(0).then(() => false)]);
        assert.equal(exited, false, `${name} exited:\n${op.tail()}`);
        sample.rss[name] = await rssMiB(op.pid);
        sample.heap[name] = total(await metrics(port), "nodejs_heap_size_used_bytes") / 2 ** 20;
      }
      samples.push(sample);
      console.log(
        `SOAK minute ${minute}/${MINUTES} (${fault}): ${changes} changes so far, lost 0; ` +
          Object.keys(ops)
            .map((n) => `${n} RSS ${sample.rss[n]?.toFixed(0)} MiB heap ${sample.heap[n]?.toFixed(0)} MiB`)
            .join("; "),
      );
    }
    report("soak", {
      load: `${MINUTES} min, ${changes} AppService changes over ${wanted.size}, ${MINUTES * 2} AcmeNamespaces`,
      faults: `${injected} (${faults.join(", ")} in turn)`,
      lost: 0,
      startedAt,
    });
    // A leak shows as a floor that keeps rising: compare the lowest RSS of the last third with the first's.
    if (samples.length >= 3) {
      const third = Math.max(1, Math.floor(samples.length / 3));
      for (const name of Object.keys(ops)) {
        const floor = (s: Sample[]) => Math.min(...s.map((x) => x.rss[name] ?? Infinity));
        const early = floor(samples.slice(0, third));
        const late = floor(samples.slice(-third));
        assert.ok(
          late - early <= GROWTH_MIB,
          `${name}: RSS floor grew ${early.toFixed(0)} → ${late.toFixed(0)} MiB`,
        );
      }
    }
  },
);

/** Wait until each AcmeNamespace named is Created; throw naming the ones that are not. */
async function persistCreated(env: TestEnv, names: readonly string[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const live = new Map((await env.client.list(AcmeNamespace)).items.map((a) => [a.metadata.name, a]));
    const behind = names.filter((n) => live.get(n)?.status?.phase !== "Created");
    if (behind.length === 0) return;
    if (Date.now() > deadline)
      throw new Error(`AcmeNamespaces lost (not Created in ${timeoutMs / 1000} s): ${behind.join(", ")}`);
    await sleep(1_000);
  }
}
