import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseHelp } from "./capabilities.ts";
import { missingRequirement } from "./testing.ts";

const HELP = `Generic flags:

      --advertise-address ip                      The IP address on which to advertise the apiserver.
      --endpoint-reconciler-type string           Use an endpoint reconciler (master-count, lease, none) (default "lease")
  -h, --help                                      help for kube-apiserver
      --feature-gates colonSeparatedMultimapStringString
                Comma-separated list of component:key=value pairs that describe feature gates. Options are:
                kube:APIResponseCompression=true|false (BETA - default=true)
                kube:ShardedListAndWatch=true|false (ALPHA - default=false)
                AllAlpha=true|false (ALPHA - default=false)
`;

describe("release capabilities from --help", () => {
  it("reads flag names and feature gates, with or without the component prefix", () => {
    const caps = parseHelp(HELP);
    for (const f of ["advertise-address", "endpoint-reconciler-type", "help", "feature-gates"])
      assert.ok(caps.flags.has(f), f);
    assert.equal(caps.flags.has("etcd-servers"), false);
    assert.deepEqual([...caps.featureGates].sort(), [
      "APIResponseCompression",
      "AllAlpha",
      "ShardedListAndWatch",
    ]);
  });
});

describe("test requirements", () => {
  it("skips below the minimum release and without the gate, saying why", () => {
    assert.equal(
      missingRequirement("v1.36.3", { ShardedListAndWatch: true }, { featureGate: "ShardedListAndWatch" }),
      undefined,
    );
    assert.equal(missingRequirement("v1.35.4", {}, { minVersion: "1.35" }), undefined);
    assert.match(
      missingRequirement("v1.34.4", {}, { minVersion: "1.35", what: "field selectors on CRDs" }) ?? "",
      /^field selectors on CRDs: needs Kubernetes 1\.35\+, the env runs v1\.34\.4$/,
    );
    assert.match(
      missingRequirement("v1.34.4", {}, { featureGate: "ShardedListAndWatch" }) ?? "",
      /ShardedListAndWatch, which the env's v1\.34\.4 lacks/,
    );
    assert.match(
      missingRequirement("v1.36.3", { ShardedListAndWatch: false }, { featureGate: "ShardedListAndWatch" }) ??
        "",
      /has off/,
    );
    assert.equal(
      missingRequirement("v1.37.2", {}, { minVersion: "1.9" }),
      undefined,
      "minors compare as numbers",
    );
  });
});
