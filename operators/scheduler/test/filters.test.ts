/**
 * The filter plugins, each on its own: readiness and cordon, taints and tolerations, nodeSelector and
 * required node affinity, resource fit against what is already placed, and seed 004's label presence.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  labelPresence,
  matchesRequirement,
  nodeAffinity,
  nodeReady,
  nodeResourcesFit,
  taintToleration,
  tolerates,
} from "../src/plugins/filters.ts";
import { info, node, pod } from "./helpers.ts";

describe("NodeReady", () => {
  it("refuses a node that is not Ready, and a cordoned one unless the pod tolerates the cordon", () => {
    assert.equal(nodeReady.filter(pod(), info(node("a"))), undefined);
    assert.deepEqual(nodeReady.filter(pod(), info(node("a", { ready: false }))), ["node(s) were not ready"]);
    const cordoned = info(node("a", { unschedulable: true }));
    assert.deepEqual(nodeReady.filter(pod(), cordoned), ["node(s) were unschedulable"]);
    const tolerant = pod({ tolerations: [{ key: "node.kubernetes.io/unschedulable", operator: "Exists" }] });
    assert.equal(nodeReady.filter(tolerant, cordoned), undefined);
  });
});

describe("TaintToleration", () => {
  const tainted = info(node("a", { taints: [{ key: "dedicated", value: "gpu", effect: "NoSchedule" }] }));

  it("refuses an untolerated NoSchedule or NoExecute taint and names it", () => {
    assert.deepEqual(taintToleration.filter(pod(), tainted), [
      "node(s) had untolerated taint {dedicated: gpu}",
    ]);
    const noExec = info(node("a", { taints: [{ key: "k", effect: "NoExecute" }] }));
    assert.deepEqual(taintToleration.filter(pod(), noExec), ["node(s) had untolerated taint {k: }"]);
  });

  it("ignores PreferNoSchedule", () => {
    const soft = info(node("a", { taints: [{ key: "k", effect: "PreferNoSchedule" }] }));
    assert.equal(taintToleration.filter(pod(), soft), undefined);
  });

  it("accepts Equal with the value, Exists with the key, and an empty-key Exists for everything", () => {
    for (const t of [
      { key: "dedicated", operator: "Equal", value: "gpu" },
      { key: "dedicated", value: "gpu", effect: "NoSchedule" },
      { key: "dedicated", operator: "Exists" },
      { operator: "Exists" },
    ]) {
      assert.equal(taintToleration.filter(pod({ tolerations: [t] }), tainted), undefined, JSON.stringify(t));
    }
    for (const t of [
      { key: "dedicated", operator: "Equal", value: "cpu" },
      { key: "dedicated", operator: "Exists", effect: "NoExecute" },
      { key: "other", operator: "Exists" },
    ]) {
      assert.ok(taintToleration.filter(pod({ tolerations: [t] }), tainted), JSON.stringify(t));
    }
  });

  it("an Exists toleration of a key tolerates that key's taint whatever its value (property)", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 8 }),
        fc.string({ maxLength: 8 }),
        fc.constantFrom("NoSchedule", "NoExecute"),
        (key, value, effect) => {
          assert.ok(tolerates({ key, operator: "Exists" }, { key, value, effect }));
          assert.equal(tolerates({ key, operator: "Equal", value }, { key, value, effect }), true);
          assert.equal(tolerates({ key: `${key}x`, operator: "Exists" }, { key, value, effect }), false);
        },
      ),
    );
  });
});

describe("NodeAffinity", () => {
  const zoned = (zone: string, extra: Record<string, string> = {}) =>
    info(node(`n-${zone}`, { labels: { zone, ...extra } }));
  type Op = "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt";
  const required = (matchExpressions: { key: string; operator: Op; values?: string[] }[]) => ({
    nodeAffinity: {
      requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions }] },
    },
  });

  it("nodeSelector: every label must be equal", () => {
    assert.equal(nodeAffinity.filter(pod({ nodeSelector: { zone: "a" } }), zoned("a")), undefined);
    assert.deepEqual(nodeAffinity.filter(pod({ nodeSelector: { zone: "a" } }), zoned("b")), [
      "node(s) didn't match Pod's node affinity/selector",
    ]);
  });

  it("required affinity: In, NotIn, Exists, DoesNotExist, Gt, Lt", () => {
    const cases: [Op, string[] | undefined, boolean][] = [
      ["In", ["a", "c"], true],
      ["In", ["b"], false],
      ["NotIn", ["b"], true],
      ["NotIn", ["a"], false],
      ["Exists", undefined, true],
      ["DoesNotExist", undefined, false],
    ];
    for (const [operator, values, fits] of cases) {
      const p = pod({ affinity: required([{ key: "zone", operator, values }]) });
      assert.equal(nodeAffinity.filter(p, zoned("a")) === undefined, fits, `${operator} ${String(values)}`);
    }
    const gen = zoned("a", { gen: "5" });
    assert.equal(
      nodeAffinity.filter(pod({ affinity: required([{ key: "gen", operator: "Gt", values: ["4"] }]) }), gen),
      undefined,
    );
    assert.ok(
      nodeAffinity.filter(pod({ affinity: required([{ key: "gen", operator: "Gt", values: ["5"] }]) }), gen),
    );
    assert.equal(
      nodeAffinity.filter(pod({ affinity: required([{ key: "gen", operator: "Lt", values: ["6"] }]) }), gen),
      undefined,
    );
    assert.ok(
      nodeAffinity.filter(pod({ affinity: required([{ key: "zone", operator: "Lt", values: ["6"] }]) }), gen),
      "not a number",
    );
  });

  it("terms are ORed, expressions in a term ANDed; matchFields on metadata.name", () => {
    const p = pod({
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: "zone", operator: "In", values: ["a"] },
                  { key: "gpu", operator: "Exists" },
                ],
              },
              { matchFields: [{ key: "metadata.name", operator: "In", values: ["n-c"] }] },
            ],
          },
        },
      },
    });
    assert.ok(nodeAffinity.filter(p, zoned("a")), "zone a without gpu");
    assert.equal(nodeAffinity.filter(p, zoned("a", { gpu: "" })), undefined);
    assert.equal(nodeAffinity.filter(p, zoned("c")), undefined, "by name");
  });

  it("NotIn and In of the same values are complements; DoesNotExist is not Exists (property)", () => {
    fc.assert(
      fc.property(
        fc.dictionary(fc.constantFrom("a", "b", "c"), fc.constantFrom("x", "y", "z")),
        fc.constantFrom("a", "b", "c"),
        fc.array(fc.constantFrom("x", "y", "z"), { minLength: 1 }),
        (labels, key, values) => {
          assert.notEqual(
            matchesRequirement(labels, { key, operator: "In", values }),
            matchesRequirement(labels, { key, operator: "NotIn", values }),
          );
          assert.notEqual(
            matchesRequirement(labels, { key, operator: "Exists" }),
            matchesRequirement(labels, { key, operator: "DoesNotExist" }),
          );
        },
      ),
    );
  });
});

describe("NodeResourcesFit", () => {
  it("counts the requests of the pods already on the node and names every short resource", () => {
    const n = node("a", { cpu: "4", memory: "4Gi", pods: "3" });
    assert.equal(
      nodeResourcesFit.filter(pod({ cpu: "4", memory: "4Gi" }), info(n)),
      undefined,
      "exactly full fits",
    );
    const placed = [pod({ cpu: "3", memory: "1Gi" }), pod({ cpu: "500m", memory: "1Gi" })];
    assert.equal(nodeResourcesFit.filter(pod({ cpu: "500m" }), info(n, placed)), undefined);
    assert.deepEqual(nodeResourcesFit.filter(pod({ cpu: "501m", memory: "3Gi" }), info(n, placed)), [
      "Insufficient cpu",
      "Insufficient memory",
    ]);
    const full = info(n, [...placed, pod()]);
    assert.deepEqual(nodeResourcesFit.filter(pod(), full), ["Too many pods"]);
  });

  it("an extended resource the node lacks is insufficient", () => {
    const p = pod();
    (p.spec!.containers[0]!.resources!.requests as Record<string, string>)["example.com/gpu"] = "1";
    assert.deepEqual(nodeResourcesFit.filter(p, info(node("a"))), ["Insufficient example.com/gpu"]);
  });

  it("a pod fits an empty node exactly when its requests are within allocatable (property)", () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 8000 }), fc.integer({ min: 1, max: 8000 }), (want, have) => {
        const fits = nodeResourcesFit.filter(pod({ cpu: `${want}m` }), info(node("a", { cpu: `${have}m` })));
        assert.equal(fits === undefined, want <= have);
      }),
    );
  });
});

describe("LabelPresence (seed 004, example 11-17)", () => {
  it("presence true: the node needs every label; false: none of them", () => {
    const must = labelPresence({ labels: ["selectable"], presence: true });
    assert.equal(must.filter(pod(), info(node("a", { labels: { selectable: "" } }))), undefined);
    assert.deepEqual(must.filter(pod(), info(node("a"))), ["node(s) didn't have the requested labels"]);
    const mustNot = labelPresence({ labels: ["retired", "broken"], presence: false });
    assert.equal(mustNot.filter(pod(), info(node("a"))), undefined);
    assert.deepEqual(mustNot.filter(pod(), info(node("a", { labels: { broken: "yes" } }))), [
      "node(s) had labels that must be absent",
    ]);
  });
});
