/**
 * testenv — a real local Kubernetes control plane built from the official Go modules (etcd,
 * kube-apiserver, kube-controller-manager, kube-scheduler, kwok), with fault injection and the helpers
 * tests use to share one environment per test run.
 *
 * It uses the client to wait for health and create nodes; nothing in the runtime depends on it.
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
  type ComponentStatus,
  type EnvState,
  type UpOptions,
  type UpResult,
} from "./controlplane.ts";
export { SIMULATE_EXIT_CODE_ANNOTATION, SIMULATE_DURATION_ANNOTATION } from "./stages.ts";
export { useTestEnv, startOwnedEnv, TEST_ENV_VARIABLE, type TestEnv } from "./testing.ts";
export { kubeConfigVia, startTcpProxy, type TcpProxy } from "./proxy.ts";
export { eventually } from "./eventually.ts";
export { ensureHelm, helmLint, helmTemplate, helmPath, HelmError, HELM_VERSION } from "./helm.ts";
