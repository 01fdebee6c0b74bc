/** status.nodes and the desired Deployment as pure functions (no control plane). */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { DeepReadonly, Pod } from "opkit";
import { Memcached } from "../src/api/v1alpha1/memcached.ts";
import { desiredDeployment, nodeNames } from "../src/controllers/memcached.ts";

const pod = (name: string, phase: string, deleting = false) =>
  ({
    metadata: { name, ...(deleting ? { deletionTimestamp: "2026-01-01T00:00:00Z" } : {}) },
    status: { phase },
  }) as DeepReadonly<Pod>;

test("status.nodes: live pods only, sorted by name", () => {
  assert.deepEqual(
    nodeNames([
      pod("m-c", "Running"),
      pod("m-a", "Pending"),
      pod("m-b", "Running", true),
      pod("m-d", "Failed"),
    ]),
    ["m-a", "m-c"],
  );
});

test("the Deployment: size replicas of a non-root memcached, selected by the instance labels", () => {
  const d = desiredDeployment(Memcached.new("cache", { size: 3 }, { namespace: "team" }));
  assert.equal(d.spec?.replicas, 3);
  assert.equal(d.spec?.selector.matchLabels?.["app.kubernetes.io/instance"], "cache");
  const c = d.spec?.template.spec?.containers[0];
  assert.equal(c?.ports?.[0]?.containerPort, 11211);
  assert.equal(d.spec?.template.spec?.securityContext?.runAsNonRoot, true);
  assert.deepEqual(c?.securityContext?.capabilities?.drop, ["ALL"]);
});
