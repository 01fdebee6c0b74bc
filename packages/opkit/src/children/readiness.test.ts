import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { kindRef, type KubeObject } from "../client/types.ts";
import { managerLabelValue } from "./children.ts";
import { isChildReady, readinessRule } from "./readiness.ts";

const deployment = (generation: number, spec: number, status: Record<string, number>): KubeObject =>
  ({
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: "d", generation },
    spec: { replicas: spec },
    status,
  }) as KubeObject;

const withConditions = (apiVersion: string, kind: string, conditions: { type: string; status: string }[]) =>
  ({ apiVersion, kind, metadata: { name: "x" }, status: { conditions } }) as KubeObject;

describe("built-in readiness", () => {
  it("Deployment: the current generation observed, all replicas updated and available", () => {
    assert.equal(
      isChildReady(deployment(2, 3, { observedGeneration: 2, updatedReplicas: 3, availableReplicas: 3 })),
      true,
    );
    assert.equal(
      isChildReady(deployment(2, 3, { observedGeneration: 1, updatedReplicas: 3, availableReplicas: 3 })),
      false,
      "status from an older generation",
    );
    assert.equal(
      isChildReady(deployment(2, 3, { observedGeneration: 2, updatedReplicas: 3, availableReplicas: 2 })),
      false,
    );
    assert.equal(
      isChildReady(deployment(2, 3, { observedGeneration: 2, updatedReplicas: 1, availableReplicas: 3 })),
      false,
      "old pods still serving during a rollout",
    );
    assert.equal(isChildReady(deployment(1, 0, { observedGeneration: 1 })), true, "scaled to zero");
  });

  it("StatefulSet: ready replicas reach the spec, all of the update revision", () => {
    const sts = (ready: number, updated = ready, spec: object = {}, current = "s-2") =>
      ({
        apiVersion: "apps/v1",
        kind: "StatefulSet",
        metadata: { name: "s", generation: 1 },
        spec: { replicas: 2, ...spec },
        status: {
          observedGeneration: 1,
          readyReplicas: ready,
          updatedReplicas: updated,
          currentRevision: current,
          updateRevision: "s-2",
        },
      }) as KubeObject;
    assert.equal(isChildReady(sts(1)), false);
    assert.equal(isChildReady(sts(2)), true);
    assert.equal(isChildReady(sts(2, 1)), false, "an old pod, ready, not yet replaced");
    assert.equal(isChildReady(sts(2, 2, {}, "s-1")), false, "the rolling update has not finished");
    const partitioned = { updateStrategy: { type: "RollingUpdate", rollingUpdate: { partition: 1 } } };
    assert.equal(isChildReady(sts(2, 1, partitioned, "s-1")), true, "pods below the partition stay old");
    assert.equal(isChildReady(sts(2, 0, { updateStrategy: { type: "OnDelete" } })), true);
  });

  it("Job: Complete; Pod: Ready", () => {
    assert.equal(
      isChildReady(withConditions("batch/v1", "Job", [{ type: "Complete", status: "True" }])),
      true,
    );
    assert.equal(
      isChildReady(withConditions("batch/v1", "Job", [{ type: "Failed", status: "True" }])),
      false,
    );
    assert.equal(isChildReady(withConditions("v1", "Pod", [{ type: "Ready", status: "True" }])), true);
    assert.equal(isChildReady(withConditions("v1", "Pod", [{ type: "Ready", status: "False" }])), false);
    assert.equal(isChildReady(withConditions("v1", "Pod", [])), false);
  });

  it("everything else is ready once it exists", () => {
    assert.equal(isChildReady({ apiVersion: "v1", kind: "ConfigMap", metadata: { name: "c" } }), true);
    assert.equal(isChildReady({ apiVersion: "v1", kind: "Service", metadata: { name: "s" } }), true);
  });

  it("per-kind overrides win over the built-ins, matched by group and kind, not version", () => {
    type Svc = KubeObject & { spec?: { clusterIP?: string } };
    const rule = readinessRule(kindRef<Svc>("v1", "Service"), (s) => Boolean(s.spec?.clusterIP));
    const svc: Svc = { apiVersion: "v1", kind: "Service", metadata: { name: "s" } };
    assert.equal(isChildReady(svc, [rule]), false);
    const withIp: Svc = { ...svc, spec: { clusterIP: "10.0.0.1" } };
    assert.equal(isChildReady(withIp, [rule]), true);
    const always = readinessRule(kindRef("apps/v1beta2", "Deployment"), () => true);
    assert.equal(isChildReady(deployment(2, 3, {}), [always]), true);
  });
});

describe("managerLabelValue", () => {
  it("uses a field manager that is a valid label value as is, and hashes the others", () => {
    assert.equal(managerLabelValue("webapp-controller"), "webapp-controller");
    const hashed = managerLabelValue("example.com/webapp:controller");
    assert.match(hashed, /^fm-[0-9a-f]{40}$/);
    assert.equal(managerLabelValue("example.com/webapp:controller"), hashed, "stable");
    assert.match(managerLabelValue("x".repeat(64)), /^fm-/);
  });
});
