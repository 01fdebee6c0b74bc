/**
 * Fault test on the AcmeNamespace operator: killed with SIGKILL at random moments while N AcmeNamespaces
 * are created, and started again each time (its own process, its generated RBAC). Every AcmeNamespace
 * must reach phase Created with exactly one Namespace and one of each child, all owned by it: no orphan,
 * no duplicate. Prints one `FAULT ...` line: load, kills, objects lost, duration.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import {
  LimitRanges,
  Namespaces,
  NetworkPolicies,
  ResourceQuotas,
  RoleBindings,
  type KindRef,
  type KubeObject,
} from "opkit";
import {
  operatorProject,
  sleep,
  useTestEnv,
  type OperatorProcess,
  type OperatorProject,
  type TestEnv,
} from "opkit/testenv";
import { AcmeNamespace } from "../operators/acme-namespace/src/api/v1alpha1/acmenamespace.ts";
import { persist, pool, report, scaled } from "./harness.ts";

const root = fileURLToPath(new URL("../operators/acme-namespace", import.meta.url));

describe("faults: the AcmeNamespace operator", { timeout: 600_000 }, () => {
  let env: TestEnv;
  let project: OperatorProject;
  const prefix = `fault-acme-${randomBytes(2).toString("hex")}`;
  const names: string[] = [];

  before(async () => {
    env = await useTestEnv();
    project = await operatorProject(env, root, { namespace: "fault-acme" });
  });
  after(async () => {
    // The operator removes its finalizer on deletion (no billing configured); then garbage collection
    // removes each Namespace with its owner.
    let op: OperatorProcess | undefined;
    try {
      op = await project?.start(["--webhook-bind-address=0"]);
      await pool(names, 8, (name) =>
        env.client.delete(AcmeNamespace, name).then(
          () => undefined,
          () => undefined,
        ),
      );
      const by = Date.now() + 60_000;
      while (
        Date.now() < by &&
        (await env.client.list(AcmeNamespace)).items.some((a) => (a.metadata.name ?? "").startsWith(prefix))
      )
        await sleep(1_000);
    } finally {
      for (const name of names)
        await env.client
          .patch(AcmeNamespace, name, { metadata: { finalizers: null } }, { type: "merge" })
          .catch(() => undefined);
      await op?.stop();
      await project?.cleanup();
      await env?.cleanup();
    }
  });

  it("SIGKILLed at random moments during N creations and restarted: every one Created, no orphan or duplicate", async () => {
    const startedAt = Date.now();
    const n = scaled(30);
    let op = await project.start(["--webhook-bind-address=0"]);
    // K kills spread over the creations: the i-th once about i/(K+1) of them were sent, a random moment
    // later; creations go on while the operator is down and starting again.
    const plannedKills = Math.max(2, scaled(4));
    let sent = 0;
    let kills = 0;
    const killer = (async () => {
      for (let i = 1; i <= plannedKills; i++) {
        while (sent < (i * n) / (plannedKills + 1)) await sleep(100);
        await sleep(Math.random() * 1_500);
        await op.kill();
        kills++;
        op = await project.start(["--webhook-bind-address=0"]);
      }
    })();
    for (let i = 0; i < n; i++) names.push(`${prefix}-${i}`);
    await pool(names, 1, async (name) => {
      await persist(`create ${name}`, () =>
        env.client.create({
          apiVersion: AcmeNamespace.apiVersion,
          kind: "AcmeNamespace",
          metadata: { name },
          spec: { namespaceName: `${name}-ns`, adminUsername: "kim", deploymentTier: "dev" },
        } as KubeObject),
      );
      sent++;
      await sleep(200);
    });
    await killer;

    const problems = await settle(env, names, prefix, 180_000);
    const lost = new Set(problems.map((p) => p.split(":")[0]));
    report("acme-sigkill", {
      load: `${n} AcmeNamespaces created`,
      faults: `${kills} SIGKILLs of the operator, restarted each time`,
      lost: lost.size,
      startedAt,
    });
    assert.deepEqual(
      problems,
      [],
      `AcmeNamespaces lost or duplicated after ${kills} kills:\n${problems.join("\n")}`,
    );
    await op.stop();
  });
});

/**
 * Wait until every AcmeNamespace is Created with its Namespace and exactly one of each child, all owned
 * by it, and no Namespace of the test is an orphan; returns what is still wrong at the deadline.
 */
async function settle(
  env: TestEnv,
  names: readonly string[],
  prefix: string,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const problems = await check(env, names, prefix).catch((err: Error) => [
      `(check failed: ${err.message})`,
    ]);
    if (problems.length === 0 || Date.now() > deadline) return problems;
    await sleep(2_000);
  }
}

async function check(env: TestEnv, names: readonly string[], prefix: string): Promise<string[]> {
  const problems: string[] = [];
  const acmes = new Map(
    (await env.client.list(AcmeNamespace)).items
      .filter((a) => (a.metadata.name ?? "").startsWith(prefix))
      .map((a) => [a.metadata.name, a]),
  );
  const namespaces = (await env.client.list(Namespaces)).items.filter((n) =>
    (n.metadata.name ?? "").startsWith(prefix),
  );
  const uids = new Set([...acmes.values()].map((a) => a.metadata.uid));
  for (const ns of namespaces) {
    const owner = ns.metadata.ownerReferences?.find((r) => r.controller)?.uid;
    if (!owner || !uids.has(owner))
      problems.push(`${ns.metadata.name}: an orphan Namespace (owner ${owner ?? "none"})`);
  }
  const children: [string, KindRef][] = [
    ["ResourceQuota", ResourceQuotas],
    ["LimitRange", LimitRanges],
    ["NetworkPolicy", NetworkPolicies],
    ["RoleBinding", RoleBindings],
  ];
  for (const name of names) {
    const a = acmes.get(name);
    if (!a) {
      problems.push(`${name}: the AcmeNamespace is missing`);
      continue;
    }
    const ready = a.status?.conditions?.find((c) => c.type === "Ready");
    if (
      a.status?.phase !== "Created" ||
      ready?.status !== "True" ||
      a.status.observedGeneration !== a.metadata.generation
    ) {
      problems.push(`${name}: phase ${a.status?.phase}, Ready ${ready?.status} (${ready?.message ?? ""})`);
      continue;
    }
    const nsName = `${name}-ns`;
    const ns = namespaces.filter((n) => n.metadata.name === nsName);
    if (
      ns.length !== 1 ||
      ns[0]?.metadata.ownerReferences?.find((r) => r.controller)?.uid !== a.metadata.uid
    ) {
      problems.push(`${name}: Namespace ${nsName} missing or not owned by it`);
      continue;
    }
    for (const [kind, ref] of children) {
      const items = (await env.client.list(ref, { namespace: nsName })).items.filter(
        (o) => o.metadata.ownerReferences?.find((r) => r.controller)?.uid === a.metadata.uid,
      );
      if (items.length !== 1)
        problems.push(`${name}: ${items.length} ${kind}s owned in ${nsName} (want exactly 1)`);
    }
  }
  return problems;
}
