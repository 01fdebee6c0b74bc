import { test } from "node:test";
import assert from "node:assert/strict";
import { parser } from "@prometheus-io/lezer-promql";
import { parse as parseYaml } from "yaml";
import { Metrics } from "../metrics/index.ts";
import { grafanaDashboard, helmMonitoringFiles, monitoringFiles, prometheusRule } from "./monitoring.ts";

const input = { name: "memcached-operator", namespace: "memcached-system" };

/** Every PromQL expression of the dashboard and the rules. */
function expressions(): string[] {
  const panels = grafanaDashboard(input).panels as Array<{ targets: Array<{ expr: string }> }>;
  const rules = prometheusRule(input).spec.groups as Array<{ rules: Array<{ expr: string }> }>;
  return [
    ...panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ...rules.flatMap((g) => g.rules.map((r) => r.expr)),
  ];
}

test("every expression is valid PromQL (Prometheus' own grammar)", () => {
  for (const expr of expressions()) {
    const tree = parser.parse(expr.replaceAll("$job", "x"));
    let error = false;
    tree.iterate({ enter: (n) => void (n.type.isError && (error = true)) });
    assert.ok(!error, `not valid PromQL: ${expr}`);
  }
});

test("every metric the dashboard and rules read is one opkit's manager exports", async () => {
  const m = new Metrics({ processMetrics: false });
  m.reconcile("c", { maxConcurrentReconciles: 1 }).start().end("success");
  m.queueMetrics("c").onGet?.("k", 1);
  m.queueMetrics("c").onDone?.("k", 1);
  m.trackQueue("c", { unfinishedWorkMs: () => 0, longestRunningMs: () => 0 });
  m.trackInformers(() => [{ kind: "v1/Pod", synced: true, objects: 1, watchRequests: 1, relists: 0 }]);
  m.leaderStatus("lease")(true);
  m.onRequest("h")({ method: "GET", path: "/", watch: false, code: 200, durationMs: 1 });
  const exported = new Set(
    (await m.text())
      .split("\n")
      .filter((l) => l && !l.startsWith("#"))
      .map((l) => /^[a-zA-Z_:][\w:]*/.exec(l)![0]),
  );
  const used = new Set(
    expressions().flatMap(
      (e) => e.match(/\b(?:controller_runtime|workqueue|opkit|leader_election|rest_client)_\w+/g) ?? [],
    ),
  );
  assert.ok(used.size >= 12, `${used.size} metrics used`);
  for (const name of used) assert.ok(exported.has(name), `${name} is not exported by opkit`);
});

test("the rules alert on a stuck queue, a high error rate and no leader; files are in step", () => {
  const rule = prometheusRule(input);
  assert.equal(rule.metadata.namespace, "memcached-system");
  const alerts = (rule.spec.groups as Array<{ rules: Array<{ alert: string; for: string }> }>)[0]!.rules;
  assert.deepEqual(
    alerts.map((a) => a.alert),
    ["OperatorQueueStuck", "OperatorReconcileErrorsHigh", "OperatorNoLeader"],
  );
  const files = monitoringFiles(input);
  assert.deepEqual(JSON.parse(files.get("monitoring/grafana-dashboard.json")!), grafanaDashboard(input));
  assert.deepEqual(parseYaml(files.get("monitoring/prometheus-rule.yaml")!), rule);
  const helm = helmMonitoringFiles(input).get("templates/monitoring.yaml")!;
  assert.match(helm, /^\{\{- if \.Values\.monitoring\.enabled \}\}$/m);
  assert.match(helm, /\{\{ \.Files\.Get "dashboards\/grafana-dashboard\.json" \| indent 4 \}\}/);
  assert.match(helm, /kind: PrometheusRule/);
});
