/**
 * Profiles from the `--config` file: defaults, enabling and disabling plugins, weights, several
 * schedulers, the sample file; and every wrong file refused with the field it is wrong in.
 */
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { defaultProfile, parseConfig, SchedulerConfigError } from "../src/config.ts";

const names = (p: { filters: readonly { name: string }[] }) => p.filters.map((f) => f.name);
const weights = (p: { scores: readonly { plugin: { name: string }; weight: number }[] }) =>
  Object.fromEntries(p.scores.map((s) => [s.plugin.name, s.weight]));

function refused(yaml: string, field: string, message: RegExp): void {
  assert.throws(
    () => parseConfig(yaml, "cfg.yaml"),
    (e: unknown) => {
      assert.ok(e instanceof SchedulerConfigError, String(e));
      const hit = e.issues.find((i) => i.field === field);
      assert.ok(hit, `no issue at ${field}: ${e.message}`);
      assert.match(hit.message, message);
      assert.match(
        e.message,
        new RegExp(`^invalid scheduler configuration cfg\\.yaml: .*${field.replace(/[[\].]/g, "\\$&")}`),
      );
      return true;
    },
  );
}

describe("scheduler configuration", () => {
  it("defaults: four filters, four scores of weight 1, named opkit-scheduler", () => {
    const p = defaultProfile();
    assert.equal(p.schedulerName, "opkit-scheduler");
    assert.deepEqual(names(p), ["NodeReady", "NodeAffinity", "TaintToleration", "NodeResourcesFit"]);
    assert.deepEqual(weights(p), {
      LeastAllocated: 1,
      BalancedAllocation: 1,
      ImageLocality: 1,
      OwnerSpread: 1,
    });
    const [fromFile] = parseConfig("profiles: [{}]", "x");
    assert.deepEqual(names(fromFile!), names(p));
    assert.deepEqual(weights(fromFile!), weights(p));
  });

  it("the sample: two schedulers, label presence in one, other weights in the other", async () => {
    const text = await readFile(new URL("../config/samples/scheduler-config.yaml", import.meta.url), "utf8");
    const [first, second] = parseConfig(text, "sample");
    assert.equal(first?.schedulerName, "opkit-scheduler");
    assert.deepEqual(names(first).at(-1), "LabelPresence");
    assert.equal(second?.schedulerName, "opkit-balanced");
    assert.deepEqual(weights(second), { LeastAllocated: 1, BalancedAllocation: 5, OwnerSpread: 1 });
  });

  it("disabled '*' drops every default; enabled adds in order", () => {
    const [p] = parseConfig(
      `profiles:
  - schedulerName: s
    plugins:
      filter: { disabled: [{ name: "*" }], enabled: [{ name: NodeResourcesFit }] }
      score: { disabled: [{ name: "*" }], enabled: [{ name: OwnerSpread, weight: 7 }] }`,
      "x",
    );
    assert.deepEqual(names(p!), ["NodeResourcesFit"]);
    assert.deepEqual(weights(p!), { OwnerSpread: 7 });
  });

  it("refuses a wrong file naming the field", () => {
    refused("profiles: []", "profiles", /non-empty list/);
    refused("profile: []", "profile", /unknown field/);
    refused("profiles: [{ schedulerName: Big_Name }]", "profiles[0].schedulerName", /DNS subdomain/);
    refused("profiles: [{ schedulerName: default-scheduler }]", "profiles[0].schedulerName", /cluster's own/);
    refused(
      "profiles: [{ schedulerName: a }, { schedulerName: a }]",
      "profiles[1].schedulerName",
      /earlier profile/,
    );
    refused(
      "profiles: [{ plugins: { score: { enabled: [{ name: LeastAllocated, weight: 0 }] } } }]",
      "profiles[0].plugins.score.enabled[0].weight",
      /whole number from 1 to 100, got 0/,
    );
    refused(
      "profiles: [{ plugins: { score: { enabled: [{ name: MostAllocated }] } } }]",
      "profiles[0].plugins.score.enabled[0].name",
      /unknown plugin "MostAllocated" \(known: LeastAllocated/,
    );
    refused(
      "profiles: [{ plugins: { filter: { enabled: [{ name: LeastAllocated }] } } }]",
      "profiles[0].plugins.filter.enabled[0].name",
      /unknown plugin/,
    );
    refused(
      "profiles: [{ plugins: { filter: { enabled: [{ name: LabelPresence }] } } }]",
      "profiles[0].pluginConfig",
      /LabelPresence is enabled but has no arguments/,
    );
    refused(
      "profiles: [{ plugins: { filter: { enabled: [{ name: LabelPresence }] } }, pluginConfig: [{ name: LabelPresence, args: { labels: [], presence: yes } }] }]",
      "profiles[0].pluginConfig[0].args.labels",
      /non-empty list/,
    );
    refused(
      "profiles: [{ plugins: { filter: { enabled: [{ name: LabelPresence }] } }, pluginConfig: [{ name: LabelPresence, args: { labels: [a], presence: yes } }] }]",
      "profiles[0].pluginConfig[0].args.presence",
      /true or false/,
    );
    refused(
      "profiles: [{ pluginConfig: [{ name: LabelPresence, args: { labels: [a], presence: true } }] }]",
      "profiles[0].pluginConfig",
      /not enabled/,
    );
    refused(
      "profiles: [{ plugins: { score: { enable: [] } } }]",
      "profiles[0].plugins.score.enable",
      /unknown field/,
    );
    refused("kind: Policy\nprofiles: [{}]", "kind", /SchedulerConfiguration/);
    refused("profiles: [{: ", "(file)", /not YAML/);
  });
});
