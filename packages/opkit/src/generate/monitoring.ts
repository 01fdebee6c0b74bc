/**
 * Monitoring for a generated operator: a Grafana dashboard and a PrometheusRule, both on the metric
 * names controller-runtime and client-go use (plus opkit's informer metrics), so they read any opkit
 * operator and, but for the informer panels, any controller-runtime one. The panels are the ones
 * `opkit top` shows; the alerts catch a stuck queue, a rising error rate and a lost leader.
 *
 * They are written beside the deployment (config/monitoring/, and in the chart behind
 * `monitoring.enabled`), never into the kustomize base: a PrometheusRule needs the Prometheus
 * Operator's CRD, which a cluster may not have.
 */
import type { KubeObject } from "../client/types.ts";
import { GENERATED_HEADER } from "./files.ts";
import { toYaml, toYamlStream } from "./manifests.ts";

/** Which operator the dashboard and rules are about. */
export interface MonitoringInput {
  /** The operator's name (its Deployment, and the `job` label Prometheus gives its metrics). */
  name: string;
  /** The namespace the PrometheusRule goes in. */
  namespace: string;
}

interface Target {
  expr: string;
  legendFormat: string;
}

/** One time-series panel on a 24-column grid. */
function panel(
  id: number,
  title: string,
  unit: string,
  targets: Target[],
  x: number,
  y: number,
  description: string,
) {
  return {
    id,
    type: "timeseries",
    title,
    description,
    datasource: { type: "prometheus", uid: "${datasource}" },
    gridPos: { h: 8, w: 12, x, y },
    fieldConfig: { defaults: { unit }, overrides: [] },
    options: { legend: { displayMode: "list", placement: "bottom" }, tooltip: { mode: "multi" } },
    targets: targets.map((t, i) => ({ ...t, refId: String.fromCharCode(65 + i) })),
  };
}

/**
 * A Grafana dashboard (JSON model, schema 39) with the panels of `opkit top`: reconciles by result,
 * errors, reconcile time p50/p99, queue depth and adds, longest-running reconcile, active workers,
 * informer objects and watch restarts, leader status and API requests. Variables pick the data source
 * and the job (default: the operator's name).
 */
export function grafanaDashboard(input: MonitoringInput): Record<string, unknown> {
  // Long on purpose: the dashboard's panels are data, one literal per panel.
  const sel = 'job=~"$job"';
  const panels = [
    panel(
      1,
      "Reconciles per second by result",
      "ops",
      [
        {
          expr: `sum by (controller, result) (rate(controller_runtime_reconcile_total{${sel}}[5m]))`,
          legendFormat: "{{controller}} {{result}}",
        },
      ],
      0,
      0,
      "controller_runtime_reconcile_total: success, error, requeue, requeue_after.",
    ),
    panel(
      2,
      "Reconcile errors per second",
      "ops",
      [
        {
          expr: `sum by (controller) (rate(controller_runtime_reconcile_errors_total{${sel}}[5m]))`,
          legendFormat: "{{controller}}",
        },
        {
          expr: `sum by (controller) (rate(controller_runtime_terminal_reconcile_errors_total{${sel}}[5m]))`,
          legendFormat: "{{controller}} terminal",
        },
      ],
      12,
      0,
      "Errors are retried with backoff; terminal errors are not.",
    ),
    panel(
      3,
      "Reconcile time p50 / p99",
      "s",
      [
        {
          expr: `histogram_quantile(0.5, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{${sel}}[5m])))`,
          legendFormat: "{{controller}} p50",
        },
        {
          expr: `histogram_quantile(0.99, sum by (controller, le) (rate(controller_runtime_reconcile_time_seconds_bucket{${sel}}[5m])))`,
          legendFormat: "{{controller}} p99",
        },
      ],
      0,
      8,
      "controller_runtime_reconcile_time_seconds.",
    ),
    panel(
      4,
      "Work queue depth and adds per second",
      "short",
      [
        { expr: `sum by (name) (workqueue_depth{${sel}})`, legendFormat: "{{name}} depth" },
        { expr: `sum by (name) (rate(workqueue_adds_total{${sel}}[5m]))`, legendFormat: "{{name}} adds/s" },
      ],
      12,
      8,
      "A depth that only grows means reconciles cannot keep up.",
    ),
    panel(
      5,
      "Longest-running reconcile and workers",
      "short",
      [
        {
          expr: `max by (name) (workqueue_longest_running_processor_seconds{${sel}})`,
          legendFormat: "{{name}} longest (s)",
        },
        {
          expr: `sum by (controller) (controller_runtime_active_workers{${sel}})`,
          legendFormat: "{{controller}} active workers",
        },
        {
          expr: `sum by (controller) (controller_runtime_max_concurrent_reconciles{${sel}})`,
          legendFormat: "{{controller}} max workers",
        },
      ],
      0,
      16,
      "A reconcile that never returns shows as a longest-running time that keeps growing.",
    ),
    panel(
      6,
      "Informer cache",
      "short",
      [
        { expr: `sum by (kind) (opkit_informer_objects{${sel}})`, legendFormat: "{{kind}} objects" },
        {
          expr: `sum by (kind) (rate(opkit_informer_watch_restarts_total{${sel}}[5m]))`,
          legendFormat: "{{kind}} watch restarts/s",
        },
        {
          expr: `sum by (kind) (rate(opkit_informer_relists_total{${sel}}[5m]))`,
          legendFormat: "{{kind}} relists/s",
        },
      ],
      12,
      16,
      "opkit's own informer metrics (empty for Go operators).",
    ),
    panel(
      7,
      "Leader",
      "short",
      [
        {
          expr: `max by (name, pod) (leader_election_master_status{${sel}})`,
          legendFormat: "{{pod}} {{name}}",
        },
      ],
      0,
      24,
      "1 on the replica that leads; with several replicas exactly one should be 1.",
    ),
    panel(
      8,
      "API requests per second by code",
      "reqps",
      [{ expr: `sum by (code) (rate(rest_client_requests_total{${sel}}[5m]))`, legendFormat: "{{code}}" }],
      12,
      24,
      "rest_client_requests_total: 429 and 5xx answers mean the API server pushes back.",
    ),
  ];
  return {
    title: `${input.name} operator`,
    uid: `opkit-${input.name}`.slice(0, 40),
    tags: ["opkit", "operator"],
    timezone: "browser",
    schemaVersion: 39,
    version: 1,
    refresh: "30s",
    time: { from: "now-1h", to: "now" },
    templating: {
      list: [
        { name: "datasource", type: "datasource", query: "prometheus", label: "Data source" },
        {
          name: "job",
          type: "query",
          label: "Job",
          datasource: { type: "prometheus", uid: "${datasource}" },
          query: "label_values(controller_runtime_reconcile_total, job)",
          current: { text: input.name, value: input.name },
          includeAll: false,
        },
      ],
    },
    panels,
  };
}

/** A monitoring.coreos.com/v1 PrometheusRule, as far as opkit writes one. */
export interface PrometheusRuleObject extends KubeObject {
  /** The rule groups Prometheus evaluates. */
  spec: {
    /** Groups of alerting rules (name, rules with alert, expr, for, labels, annotations). */
    groups: unknown[];
  };
}

/**
 * A PrometheusRule (monitoring.coreos.com/v1) with three alerts for the operator's job: a queue with
 * work and no reconciles finishing for 15 minutes (or one reconcile running over 10 minutes), more
 * than 10% of reconciles failing for 15 minutes, and no replica leading for 5 minutes.
 */
export function prometheusRule(input: MonitoringInput): PrometheusRuleObject {
  const job = `job="${input.name}"`;
  const labels = { severity: "warning", operator: input.name };
  return {
    apiVersion: "monitoring.coreos.com/v1",
    kind: "PrometheusRule",
    metadata: {
      name: `${input.name}-alerts`,
      namespace: input.namespace,
      labels: { "app.kubernetes.io/name": input.name, "app.kubernetes.io/component": "monitoring" },
    },
    spec: {
      groups: [
        {
          name: `${input.name}.rules`,
          rules: [
            {
              alert: "OperatorQueueStuck",
              expr:
                `(sum by (name) (workqueue_depth{${job}}) > 0 and sum by (name) (rate(workqueue_work_duration_seconds_count{${job}}[15m])) == 0)` +
                ` or max by (name) (workqueue_longest_running_processor_seconds{${job}}) > 600`,
              for: "15m",
              labels,
              annotations: {
                summary: "{{ $labels.name }}: the work queue is not making progress",
                description:
                  "Keys wait in the queue but no reconcile finished for 15 minutes, or one has run for over 10 minutes.",
              },
            },
            {
              alert: "OperatorReconcileErrorsHigh",
              expr:
                `sum by (controller) (rate(controller_runtime_reconcile_errors_total{${job}}[10m]))` +
                ` / sum by (controller) (rate(controller_runtime_reconcile_total{${job}}[10m])) > 0.1`,
              for: "15m",
              labels,
              annotations: {
                summary: "{{ $labels.controller }}: over 10% of reconciles fail",
                description:
                  "Look at the objects' conditions and Warning Events, and at the operator's logs.",
              },
            },
            {
              alert: "OperatorNoLeader",
              // Only where leader election runs: without it the series does not exist and nothing fires.
              expr: `max(leader_election_master_status{${job}}) < 1`,
              for: "5m",
              labels: { ...labels, severity: "critical" },
              annotations: {
                summary: `${input.name}: no replica leads`,
                description:
                  "Leadership was lost and not taken over: nothing reconciles. Check the Lease and the replicas.",
              },
            },
          ],
        },
      ],
    },
  };
}

/** The files of config/monitoring/: the dashboard JSON and the PrometheusRule, by relative path. */
export function monitoringFiles(input: MonitoringInput): Map<string, string> {
  return new Map([
    ["monitoring/grafana-dashboard.json", `${JSON.stringify(grafanaDashboard(input), null, 2)}\n`],
    ["monitoring/prometheus-rule.yaml", GENERATED_HEADER + toYaml(prometheusRule(input))],
  ]);
}

/**
 * The chart's monitoring: the dashboard as a file, and a template that renders, when
 * `monitoring.enabled` is set, a ConfigMap holding it (labelled `grafana_dashboard: "1"`, which
 * Grafana's dashboard sidecar picks up) and the PrometheusRule, in `.Values.namespace`.
 */
export function helmMonitoringFiles(input: MonitoringInput): Map<string, string> {
  const ns = "{{ .Values.namespace | quote }}";
  const rule = prometheusRule(input);
  const configMap = {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: {
      name: `${input.name}-dashboard`,
      namespace: "NAMESPACE",
      labels: { grafana_dashboard: "1", "app.kubernetes.io/name": input.name },
    },
  };
  rule.metadata.namespace = "NAMESPACE";
  const body = toYamlStream([configMap, rule])
    .split("namespace: NAMESPACE")
    .join(`namespace: ${ns}`)
    // The alerts' own templates ({{ $labels.x }}) are Prometheus', not Helm's: emit them literally.
    .replace(/\{\{ (\$labels\.\w+) \}\}/g, "{{`{{ $1 }}`}}");
  // The ConfigMap's data is the dashboard file, included by Helm so the JSON is kept once.
  const data = `data:\n  ${input.name}.json: |-\n{{ .Files.Get "dashboards/grafana-dashboard.json" | indent 4 }}\n`;
  const [cm, ...rest] = body.split("\n---\n");
  const template =
    GENERATED_HEADER +
    "{{- if .Values.monitoring.enabled }}\n" +
    `${cm!.trimEnd()}\n${data}---\n${rest.join("\n---\n").trimEnd()}\n` +
    "{{- end }}\n";
  return new Map([
    ["dashboards/grafana-dashboard.json", `${JSON.stringify(grafanaDashboard(input), null, 2)}\n`],
    ["templates/monitoring.yaml", template],
  ]);
}
