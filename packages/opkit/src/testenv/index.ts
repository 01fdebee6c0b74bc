/**
 * testenv — a real local Kubernetes control plane built from the official Go modules (etcd,
 * kube-apiserver, kube-controller-manager, kube-scheduler, kwok) plus a local volume provisioner, with
 * fault injection and the helpers tests use to share one environment per test run.
 *
 * It uses the client to wait for health, create nodes and provision volumes; nothing in the runtime
 * depends on it.
 *
 * @module opkit/testenv
 */
export * from "./versions.ts";
export {
  buildControlPlane,
  missingBinaries,
  BuildError,
  GoNotFoundError,
  type BuildProgress,
  type BuildResult,
} from "./build.ts";
export {
  ControlPlane,
  COMPONENTS,
  ComponentError,
  EnvNotRunningError,
  type ComponentName,
  type ComponentState,
  type ComponentStatus,
  type EnvState,
  type UpOptions,
  type UpResult,
} from "./controlplane.ts";
export type { StoredEntry } from "./etcd.ts";
export { InvalidEnvNameError, type EnvSettings, type NodeResources } from "./state.ts";
export {
  DEFAULT_NODES,
  DEFAULT_MAX_PODS,
  DEFAULT_NODE_CPU,
  DEFAULT_NODE_MEMORY,
  DEFAULT_SERVICE_CLUSTER_IP_RANGE,
  DEFAULT_COMPONENT_QPS,
  DEFAULT_COMPONENT_BURST,
  InvalidEnvOptionError,
  parseFeatureGates,
  parseRuntimeConfig,
  type EnvOptions,
} from "./settings.ts";
export type { NodeSpec, NodeTaint } from "./nodes.ts";
export { DEFAULT_STORAGE_CLASS, LOCAL_PROVISIONER } from "./storage.ts";
export { SIMULATE_EXIT_CODE_ANNOTATION, SIMULATE_DURATION_ANNOTATION } from "./stages.ts";
export {
  useTestEnv,
  startOwnedEnv,
  TEST_ENV_VARIABLE,
  TEST_ENV_OPTIONS,
  type TestEnv,
  type Requirement,
  type SkippableTest,
} from "./testing.ts";
export { pruneBuilds, type PruneOptions, type PruneResult, type PrunedBuild } from "./prune.ts";
export { kubeConfigVia, startTcpProxy, type TcpProxy } from "./proxy.ts";
export { eventually, sleep, WaitTimeoutError } from "./eventually.ts";
export { ensureHelm, helmLint, helmTemplate, helmPath, HelmError, HELM_VERSION } from "./helm.ts";
export {
  startOperatorProcess,
  type OperatorProcess,
  type OperatorProcessOptions,
} from "./operatorprocess.ts";
export { impersonateServiceAccount, readManifests, type ServiceAccountSession } from "./serviceaccount.ts";
export { operatorProject, type OperatorProject } from "./project.ts";
export {
  checkConversion,
  ConversionCheckError,
  ConversionRoundTripError,
  type ConversionCheckOptions,
} from "./conversion.ts";
