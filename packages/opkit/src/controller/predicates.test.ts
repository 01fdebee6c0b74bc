import { describe, it } from "node:test";
import assert from "node:assert/strict";
import type { KubeObject } from "../client/types.ts";
import {
  allows,
  and,
  annotationsChanged,
  generationChanged,
  labelSelectorPredicate,
  labelsChanged,
  not,
  or,
  resourceVersionChanged,
} from "./predicates.ts";
import { controller } from "./builder.ts";
import { ControllerConfigError } from "./reconcile.ts";
import { keyToRequest, requestKey } from "./reconcile.ts";

const obj = (meta: Partial<KubeObject["metadata"]>): KubeObject => ({
  metadata: { name: "x", namespace: "n", ...meta },
});

describe("predicates", () => {
  it("generationChanged ignores status-only and metadata-only updates", () => {
    const p = generationChanged();
    assert.equal(
      allows(
        p,
        "update",
        obj({ generation: 1, resourceVersion: "2" }),
        obj({ generation: 1, resourceVersion: "1" }),
      ),
      false,
    );
    assert.equal(allows(p, "update", obj({ generation: 2 }), obj({ generation: 1 })), true);
    assert.equal(allows(p, "create", obj({})), true);
    assert.equal(allows(p, "delete", obj({})), true);
  });

  it("annotations, labels and resourceVersion changes", () => {
    assert.equal(
      allows(
        annotationsChanged(),
        "update",
        obj({ annotations: { a: "1" } }),
        obj({ annotations: { a: "1" } }),
      ),
      false,
    );
    assert.equal(
      allows(
        annotationsChanged(),
        "update",
        obj({ annotations: { a: "2" } }),
        obj({ annotations: { a: "1" } }),
      ),
      true,
    );
    assert.equal(allows(labelsChanged(), "update", obj({ labels: {} }), obj({})), false);
    assert.equal(allows(labelsChanged(), "update", obj({ labels: { b: "" } }), obj({})), true);
    assert.equal(
      allows(
        resourceVersionChanged(),
        "update",
        obj({ resourceVersion: "1" }),
        obj({ resourceVersion: "1" }),
      ),
      false,
    );
  });

  it("label selector sees objects leaving the selection", () => {
    const p = labelSelectorPredicate("app=web");
    assert.equal(allows(p, "create", obj({ labels: { app: "db" } })), false);
    assert.equal(allows(p, "update", obj({ labels: { app: "db" } }), obj({ labels: { app: "web" } })), true);
  });

  it("and/or/not compose", () => {
    const g = generationChanged();
    const l = labelsChanged();
    const newer = obj({ generation: 2, labels: {} });
    const older = obj({ generation: 1, labels: {} });
    assert.equal(allows(and(g, l), "update", newer, older), false);
    assert.equal(allows(or(g, l), "update", newer, older), true);
    assert.equal(allows(not(g), "update", newer, older), false);
  });
});

describe("controller builder", () => {
  it("rejects bad names, a missing for(), and bad concurrency with clear errors", () => {
    assert.throws(() => controller("Bad_Name"), ControllerConfigError);
    assert.throws(() => controller("x").reconcile(() => undefined), /call for\(Kind\) before reconcile/);
    assert.throws(() => controller("x").withOptions({ maxConcurrent: 0 }), /maxConcurrent/);
  });

  it("keys round-trip for namespaced and cluster-scoped objects", () => {
    assert.deepEqual(keyToRequest(requestKey({ namespace: "a", name: "b" })), { namespace: "a", name: "b" });
    assert.deepEqual(keyToRequest(requestKey({ name: "c" })), { name: "c" });
  });
});
