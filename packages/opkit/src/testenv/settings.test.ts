import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { firstAddress } from "./certs.ts";
import { nodeObject } from "./nodes.ts";
import {
  InvalidEnvOptionError,
  checkQuantity,
  formatFeatureGates,
  parseFeatureGates,
  parseRuntimeConfig,
  resolveSettings,
  settingsDiff,
} from "./settings.ts";

const rejects = (fn: () => unknown, option: string, message: RegExp): void => {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof InvalidEnvOptionError, String(err));
    assert.equal(err.option, option);
    assert.match(err.message, message);
    return true;
  });
};

describe("env settings", () => {
  it("defaults to 3 nodes of 1,000 pods, 32 CPUs and 128Gi each, no feature gates", () => {
    const { nodes, settings } = resolveSettings();
    assert.equal(nodes, 3);
    assert.deepEqual(settings.nodeCapacity, { cpu: "32", memory: "128Gi", pods: "1000" });
    assert.deepEqual(settings.featureGates, {});
    assert.equal(settings.serviceClusterIPRange, "10.0.0.0/16");
  });

  it("takes node count and size from the options", () => {
    const { nodes, settings } = resolveSettings({ nodes: 1, maxPods: 250, nodeCpu: "8", nodeMemory: "16Gi" });
    assert.equal(nodes, 1);
    assert.deepEqual(settings.nodeCapacity, { cpu: "8", memory: "16Gi", pods: "250" });
  });

  it("rejects bad sizes with the flag's name", () => {
    rejects(() => resolveSettings({ nodes: -1 }), "--nodes", /from 0 to 500, got -1/);
    rejects(() => resolveSettings({ nodes: 1.5 }), "--nodes", /whole number/);
    rejects(() => resolveSettings({ maxPods: 0 }), "--max-pods", /from 1 to 100000/);
    rejects(() => resolveSettings({ nodeCpu: "lots" }), "--node-cpu", /not a Kubernetes quantity/);
    rejects(() => resolveSettings({ nodeMemory: "-1Gi" }), "--node-memory", /not a Kubernetes quantity/);
    rejects(() => resolveSettings({ nodeMemory: "1".repeat(10_000) }), "--node-memory", /quantity/);
  });

  it("accepts Kubernetes quantities", () => {
    for (const q of ["1", "500m", "16Gi", "1.5", "2e3", "128M", " 4 "]) assert.ok(checkQuantity("x", q));
    assert.equal(checkQuantity("x", " 4 "), "4");
  });

  it("parses --feature-gates text and formats it back sorted", () => {
    const gates = parseFeatureGates("ShardedListAndWatch=true, WatchList=FALSE,");
    assert.deepEqual(gates, { ShardedListAndWatch: true, WatchList: false });
    assert.equal(formatFeatureGates(gates), "ShardedListAndWatch=true,WatchList=false");
    assert.deepEqual(parseFeatureGates(""), {});
  });

  it("rejects malformed feature gates, naming --feature-gates", () => {
    rejects(() => parseFeatureGates("ShardedListAndWatch"), "--feature-gates", /ShardedListAndWatch=true or/);
    rejects(() => parseFeatureGates("ShardedListAndWatch=yes"), "--feature-gates", /=true or/);
    rejects(() => parseFeatureGates("Bad-Name=true"), "--feature-gates", /not a feature gate name/);
    rejects(() => parseFeatureGates("A=true,A=false"), "--feature-gates", /given twice/);
    rejects(
      () => resolveSettings({ featureGates: { A: "yes" as unknown as boolean } }),
      "featureGates",
      /true or false/,
    );
  });

  it("lists the settings a running env does not have", () => {
    const running = resolveSettings({ featureGates: "ShardedListAndWatch=true" });
    assert.deepEqual(
      settingsDiff(running, resolveSettings({ featureGates: "ShardedListAndWatch=true" })),
      [],
    );
    assert.deepEqual(settingsDiff(running, resolveSettings({ maxPods: 10, nodes: 3 })), [
      "--max-pods: running 1000, requested 10",
      "--feature-gates: running ShardedListAndWatch=true, requested (none)",
    ]);
  });

  it("finds the kubernetes Service address of a range", () => {
    assert.equal(firstAddress("10.0.0.0/16"), "10.0.0.1");
    assert.equal(firstAddress("10.96.12.0/12"), "10.96.0.1");
    assert.throws(() => firstAddress("10.0.0.0/33"), /IPv4 CIDR/);
    assert.throws(() => firstAddress("fd00::/108"), /IPv4 CIDR/);
  });
});

describe("simulated node objects", () => {
  const defaults = { cpu: "32", memory: "128Gi", pods: "1000" };

  it("merges capacity over the env's node size, with labels and taints", () => {
    const n = nodeObject(
      {
        name: "small-1",
        labels: { pool: "small" },
        taints: [{ key: "dedicated", value: "batch", effect: "NoSchedule" }],
        capacity: { cpu: 2, pods: "20", "example.com/gpu": "1" },
      },
      defaults,
    );
    assert.deepEqual(n.status?.capacity, { cpu: "2", memory: "128Gi", pods: "20", "example.com/gpu": "1" });
    assert.deepEqual(n.status?.allocatable, n.status?.capacity);
    assert.equal(n.metadata.labels?.pool, "small");
    assert.equal(n.metadata.labels?.["kubernetes.io/hostname"], "small-1");
    assert.equal(n.metadata.annotations?.["kwok.x-k8s.io/node"], "fake");
    assert.deepEqual(n.spec?.taints, [{ key: "dedicated", value: "batch", effect: "NoSchedule" }]);
  });

  it("rejects bad names, taints and resources before anything is created", () => {
    rejects(() => nodeObject({ name: "Bad_Name" }, defaults), "node name", /not a valid node name/);
    rejects(
      () => nodeObject({ name: "n", taints: [{ key: "k", effect: "Sometimes" as "NoSchedule" }] }, defaults),
      "node n taints",
      /effect of NoSchedule/,
    );
    rejects(
      () => nodeObject({ name: "n", capacity: { "bad resource": "1" } }, defaults),
      "node n capacity",
      /resource name/,
    );
    rejects(
      () => nodeObject({ name: "n", capacity: { pods: "1.5" } }, defaults),
      "node n capacity",
      /whole number/,
    );
  });
});

describe("runtimeConfig (kube-apiserver --runtime-config)", () => {
  it("parses group/version=bool entries, recorded in the settings and given to kube-apiserver only", () => {
    assert.deepEqual(parseRuntimeConfig("storagemigration.k8s.io/v1beta1=true, api/all=false,"), {
      "storagemigration.k8s.io/v1beta1": true,
      "api/all": false,
    });
    const { settings } = resolveSettings({ runtimeConfig: "storagemigration.k8s.io/v1beta1=true" });
    assert.deepEqual(settings.runtimeConfig, { "storagemigration.k8s.io/v1beta1": true });
    assert.equal(
      resolveSettings({}).settings.runtimeConfig,
      undefined,
      "nothing recorded when not asked for",
    );
  });

  it("refuses malformed entries, naming the flag", () => {
    assert.throws(
      () => parseRuntimeConfig("storagemigration.k8s.io/v1beta1=yes"),
      /--runtime-config: give <group>\/<version>=true/,
    );
    assert.throws(() => parseRuntimeConfig("Not A Group=true"), /--runtime-config/);
    assert.throws(
      () => resolveSettings({ runtimeConfig: { "bad group/v1": true } }),
      /runtimeConfig: "bad group\/v1" is not an API group\/version/,
    );
  });
});
