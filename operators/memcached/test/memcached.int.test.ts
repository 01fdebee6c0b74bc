/**
 * The Memcached operator against a real control plane (opkit env), run as its own process under its
 * generated RBAC only, with its generated CRD: seed 003's sample (size 3), applied unchanged, gives 3
 * Running memcached pods whose names are status.nodes; size 1 scales to 1 pod and 1 name; a size out of
 * range is refused. This file owns `memcacheds.cache.example.com` on the shared control plane (the
 * scaffold test uses its own domain).
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { fileURLToPath } from "node:url";
import { Deployments, InvalidError, Pods } from "opkit";
import { eventually, type OperatorProcess, type OperatorProject, type TestEnv } from "opkit/testenv";
import { operatorTest, readSample } from "../../demo/operator-test.ts";
import { Memcached, type MemcachedObject } from "../src/api/v1alpha1/memcached.ts";

const root = fileURLToPath(new URL("..", import.meta.url));

describe("Memcached operator", () => {
  let env: TestEnv;
  let ns: string;
  let project: OperatorProject;
  let op: OperatorProcess;

  operatorTest(root, {
    setup: async (t) => {
      ({ env, project, ns } = t);
      op = await project.start();
    },
  });

  /** The Running memcached pods of `name`, sorted, once status.nodes lists exactly them and `size` of them. */
  async function converged(name: string, size: number): Promise<string[]> {
    return eventually(
      `${size} Running pods listed in status.nodes`,
      async () => {
        const m = await env.client.get(Memcached, name, { namespace: ns });
        const pods = await env.client.list(Pods, {
          namespace: ns,
          labelSelector: `app.kubernetes.io/instance=${name}`,
        });
        const running = pods.items
          .filter((p) => p.status?.phase === "Running" && !p.metadata.deletionTimestamp)
          .map((p) => p.metadata.name ?? "")
          .sort();
        return running.length === size &&
          pods.items.length === size &&
          JSON.stringify(m.status?.nodes) === JSON.stringify(running) &&
          m.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True")
          ? running
          : undefined;
      },
      60_000,
    );
  }

  it("size 3 gives 3 Running pods named in status; size 1 scales down to 1", async (t) => {
    const sample = await readSample<MemcachedObject>(
      { dir: root, namespace: ns },
      "cache_v1alpha1_memcached.yaml",
    );
    await env.client.create(sample);
    const name = sample.metadata.name ?? "";
    const three = await converged(name, 3);
    t.diagnostic(`status.nodes: ${three.join(", ")}`);
    const dep = await env.client.get(Deployments, name, { namespace: ns });
    assert.equal(dep.metadata.ownerReferences?.find((r) => r.controller)?.kind, "Memcached");
    assert.equal(dep.spec?.template.spec?.containers[0]?.securityContext?.allowPrivilegeEscalation, false);

    await env.client.patch(Memcached, name, { spec: { size: 1 } }, { type: "merge", namespace: ns });
    const one = await converged(name, 1);
    assert.ok(three.includes(one[0] ?? ""), "scaling down keeps one of the pods");
  });

  it("refuses a size out of range", async () => {
    await assert.rejects(
      env.client.create(Memcached.new("too-big", { size: 51 }, { namespace: ns })),
      (err: unknown) => err instanceof InvalidError && /spec\.size/.test(err.message),
    );
  });

  it("ran with its generated RBAC and was never refused", () => {
    assert.deepEqual(
      op.output.filter((l) => /forbidden/i.test(l)),
      [],
    );
  });
});
