/**
 * kwok stages: the simulated kubelet. kwok v0.8 ships no built-in stages, so opkit states its own:
 * nodes become Ready and keep a heartbeat; scheduled pods go Running; Job pods complete (Succeeded);
 * a pod annotated `opkit.dev/simulate-exit-code: "<n>"` with n ≠ 0 fails with that exit code instead;
 * a pod being deleted finishes deleting (without this, garbage collection and namespace deletion hang).
 *
 * The stage API is kwok's (kwok.x-k8s.io/v1alpha1 Stage); the YAML is written here from a few builders.
 */

export const SIMULATE_EXIT_CODE_ANNOTATION = "opkit.dev/simulate-exit-code";
/** How long a simulated Job pod runs before it completes or fails, as a Go duration ("3s"); default 1s. */
export const SIMULATE_DURATION_ANNOTATION = "opkit.dev/simulate-duration";

const exitCodeKey = `.metadata.annotations["${SIMULATE_EXIT_CODE_ANNOTATION}"]`;

interface Expr {
  key: string;
  operator: "In" | "NotIn" | "Exists" | "DoesNotExist";
  values?: string[];
}

function stage(name: string, kind: "Node" | "Pod", exprs: Expr[], next: string, extra = ""): string {
  const sel = exprs
    .map(
      (e) =>
        `    - key: '${e.key}'\n      operator: ${e.operator}` +
        (e.values ? `\n      values:\n${e.values.map((v) => `      - '${v}'`).join("\n")}` : ""),
    )
    .join("\n");
  return `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: ${name}
spec:
  resourceRef:
    apiGroup: v1
    kind: ${kind}
  selector:
    matchExpressions:
${sel}
${extra}  next:
${next}`;
}

function indent(text: string, spaces: number): string {
  const pad = " ".repeat(spaces);
  return text
    .split("\n")
    .map((l) => (l ? pad + l : l))
    .join("\n");
}

function statusTemplate(tpl: string): string {
  return `    statusTemplate: |\n${indent(tpl.trim(), 6)}\n`;
}

const notDeleting: Expr = { key: ".metadata.deletionTimestamp", operator: "DoesNotExist" };
const running: Expr = { key: ".status.phase", operator: "In", values: ["Running"] };
const ownedByJob: Expr = { key: ".metadata.ownerReferences.[].kind", operator: "In", values: ["Job"] };

const nodeStatus = `
{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
  message: {{ .message | Quote }}
  reason: {{ .reason | Quote }}
  status: {{ .status | Quote }}
  type: {{ .type | Quote }}
{{ end }}
addresses:
{{ with NodeIP }}
- address: {{ . | Quote }}
  type: InternalIP
{{ end }}
{{ with NodeName }}
- address: {{ . | Quote }}
  type: Hostname
{{ end }}
allocatable:
{{ with .status.allocatable }}{{ YAML . 1 }}{{ else }}
  cpu: "32"
  memory: 128Gi
  pods: "110"
{{ end }}
capacity:
{{ with .status.capacity }}{{ YAML . 1 }}{{ else }}
  cpu: "32"
  memory: 128Gi
  pods: "110"
{{ end }}
nodeInfo:
  architecture: amd64
  operatingSystem: linux
  kubeletVersion: {{ printf "kwok-%s" Version | Quote }}
  kubeProxyVersion: {{ printf "kwok-%s" Version | Quote }}
  containerRuntimeVersion: {{ printf "kwok-%s" Version | Quote }}
  kernelVersion: {{ printf "kwok-%s" Version | Quote }}
  osImage: "opkit simulated node"
  machineID: ""
  bootID: ""
  systemUUID: ""
phase: Running
`;

const podRunningStatus = `
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: ContainersReady
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodScheduled
{{ range .spec.readinessGates }}
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: {{ .conditionType | Quote }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with .spec.initContainers }}
initContainerStatuses:
{{ range . }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: true
  restartCount: 0
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ end }}
{{ with NodeIPWith .spec.nodeName }}
hostIP: {{ . | Quote }}
hostIPs:
- ip: {{ . | Quote }}
{{ end }}
{{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ . | Quote }}
podIPs:
- ip: {{ . | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
`;

function terminatedStatus(phase: "Succeeded" | "Failed", exitCode: string, reason: string): string {
  return `
{{ $now := Now }}
{{ $root := . }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: ${exitCode}
      reason: ${reason}
      startedAt: {{ $root.status.startTime | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
phase: ${phase}
`;
}

const jobPodDelay = `  delay:
    durationMilliseconds: 1000
    durationFrom:
      expressionFrom: '.metadata.annotations["${SIMULATE_DURATION_ANNOTATION}"]'
`;

/**
 * kwok's own options. Stages run with no delay except where a delay is the point (heartbeats, Job pods);
 * the parallelism is raised from kwok's default of 4 so that a 1,000-pod burst goes Running in seconds.
 */
const kwokOptions = `apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
metadata:
  name: opkit
options:
  podPlayStageParallelism: 16
  nodePlayStageParallelism: 8
  nodeLeaseParallelism: 8
`;

/** kwok's `--config` file: its options and every stage, as one multi-document YAML file. */
export function kwokConfiguration(): string {
  return [kwokOptions, kwokStages()].join("---\n");
}

/** All stages, as one multi-document YAML file. */
export function kwokStages(): string {
  // Long on purpose: the kwok stage definitions are data.
  return [
    stage(
      "opkit-node-initialize",
      "Node",
      [
        {
          key: '.status.conditions.[] | select( .type == "Ready" ) | .status',
          operator: "NotIn",
          values: ["True"],
        },
      ],
      statusTemplate(nodeStatus),
    ),
    stage(
      "opkit-node-heartbeat",
      "Node",
      [
        { key: ".status.phase", operator: "In", values: ["Running"] },
        {
          key: '.status.conditions.[] | select( .type == "Ready" ) | .status',
          operator: "In",
          values: ["True"],
        },
      ],
      statusTemplate(nodeStatus),
      "  delay:\n    durationMilliseconds: 20000\n    jitterDurationMilliseconds: 25000\n",
    ),
    stage(
      "opkit-pod-running",
      "Pod",
      [
        notDeleting,
        { key: ".status.phase", operator: "In", values: ["Pending"] },
        {
          key: '.status.conditions.[] | select( .type == "Ready" ) | .status',
          operator: "NotIn",
          values: ["True"],
        },
      ],
      statusTemplate(podRunningStatus),
    ),
    stage(
      "opkit-pod-succeed",
      "Pod",
      [notDeleting, running, ownedByJob, { key: exitCodeKey, operator: "DoesNotExist" }],
      statusTemplate(terminatedStatus("Succeeded", "0", "Completed")),
      jobPodDelay,
    ),
    stage(
      "opkit-pod-succeed-exit-zero",
      "Pod",
      [notDeleting, running, ownedByJob, { key: exitCodeKey, operator: "In", values: ["0"] }],
      statusTemplate(terminatedStatus("Succeeded", "0", "Completed")),
      jobPodDelay,
    ),
    stage(
      "opkit-pod-fail",
      "Pod",
      [
        notDeleting,
        running,
        { key: exitCodeKey, operator: "Exists" },
        { key: exitCodeKey, operator: "NotIn", values: ["0"] },
      ],
      statusTemplate(
        terminatedStatus(
          "Failed",
          `{{ index $root.metadata.annotations "${SIMULATE_EXIT_CODE_ANNOTATION}" }}`,
          "Error",
        ),
      ),
      jobPodDelay,
    ),
    stage(
      "opkit-pod-delete",
      "Pod",
      [{ key: ".metadata.deletionTimestamp", operator: "Exists" }],
      "    delete: true\n",
    ),
  ].join("---\n");
}
