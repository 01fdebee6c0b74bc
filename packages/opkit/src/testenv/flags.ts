/**
 * The command line of each component, from the env's state alone (ports, directory, settings): a pure
 * function, so the flags are unit-tested without starting anything, and a restarted component gets
 * exactly the flags it started with.
 */
import { fileURLToPath } from "node:url";
import { join } from "node:path";
import { kubeconfigFile, pkiFile } from "./certs.ts";
import { formatFeatureGates } from "./settings.ts";
import type { ComponentName, EnvState } from "./state.ts";
import { binDir } from "./versions.ts";

/** kwok manages only the nodes carrying this annotation, so real nodes of another tool are never touched. */
export const NODE_ANNOTATION = "kwok.x-k8s.io/node";

/** The kwok configuration file (KwokConfiguration + Stages) in the env directory. */
export function kwokConfigPath(dir: string): string {
  return join(dir, "kwok.yaml");
}

/**
 * The local provisioner's entry script, beside this module: `.ts` when opkit runs from source, `.js`
 * from the build.
 */
export function provisionerScript(): string {
  return fileURLToPath(import.meta.url).replace(/flags\.(ts|js)$/, "provisioner.$1");
}

/**
 * The executable of a component: a built Go binary of the env's Kubernetes release, or Node running the
 * provisioner script.
 */
export function componentExe(c: ComponentName, kubernetesVersion: string): string {
  return c === "local-provisioner" ? process.execPath : join(binDir(kubernetesVersion), c);
}

/**
 * The arguments `c` is started with in the env `s`, without the flags its release lacks
 * (`s.omittedFlags`, found from the binary's help when the env started).
 */
export function componentArgs(s: EnvState, c: ComponentName): string[] {
  const omitted = new Set(s.omittedFlags?.[c] ?? []);
  const args = allComponentArgs(s, c);
  return omitted.size === 0 ? args : args.filter((a) => !omitted.has(/^--([a-z0-9-]+)/.exec(a)?.[1] ?? ""));
}

/** Every flag opkit gives `c`, whether or not its release has it. */
export function allComponentArgs(s: EnvState, c: ComponentName): string[] {
  // Long on purpose: one flag list per component, data more than code.
  const pki = (f: string): string => pkiFile(s.dir, f);
  const gates = formatFeatureGates(s.settings.featureGates);
  const gateFlag = gates ? [`--feature-gates=${gates}`] : [];
  switch (c) {
    case "etcd":
      return [
        "--name=opkit",
        `--data-dir=${join(s.dir, "etcd-data")}`,
        `--listen-client-urls=http://127.0.0.1:${s.ports.etcd}`,
        `--advertise-client-urls=http://127.0.0.1:${s.ports.etcd}`,
        `--listen-peer-urls=http://127.0.0.1:${s.ports.etcdPeer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${s.ports.etcdPeer}`,
        `--initial-cluster=opkit=http://127.0.0.1:${s.ports.etcdPeer}`,
        // Test data is disposable: skipping fsync makes etcd several times faster on small disks.
        "--unsafe-no-fsync=true",
        "--log-level=warn",
      ];
    case "kube-apiserver":
      return [
        `--etcd-servers=http://127.0.0.1:${s.ports.etcd}`,
        `--etcd-prefix=/registry`,
        ...(s.settings.runtimeConfig && Object.keys(s.settings.runtimeConfig).length
          ? [`--runtime-config=${formatFeatureGates(s.settings.runtimeConfig)}`]
          : []),
        `--secure-port=${s.ports["kube-apiserver"]}`,
        "--bind-address=127.0.0.1",
        `--advertise-address=${s.advertiseAddress}`,
        // No kubelets and no real network: do not maintain endpoints for the `kubernetes` Service.
        "--endpoint-reconciler-type=none",
        `--cert-dir=${join(s.dir, "pki")}`,
        `--tls-cert-file=${pki("apiserver.crt")}`,
        `--tls-private-key-file=${pki("apiserver.key")}`,
        `--client-ca-file=${pki("ca.crt")}`,
        "--authorization-mode=RBAC",
        `--service-cluster-ip-range=${s.settings.serviceClusterIPRange}`,
        "--allow-privileged=true",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        `--service-account-key-file=${pki("sa.pub")}`,
        `--service-account-signing-key-file=${pki("sa.key")}`,
        ...gateFlag,
        "--profiling=false",
        "--v=1",
      ];
    case "kube-controller-manager": {
      const kc = kubeconfigFile(s.dir, "kube-controller-manager");
      return [
        `--kubeconfig=${kc}`,
        `--authentication-kubeconfig=${kc}`,
        `--authorization-kubeconfig=${kc}`,
        `--secure-port=${s.ports["kube-controller-manager"]}`,
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        "--controllers=*",
        // Each controller acts with its own service account, as in a real cluster (RBAC matters).
        "--use-service-account-credentials=true",
        `--service-account-private-key-file=${pki("sa.key")}`,
        `--root-ca-file=${pki("ca.crt")}`,
        "--cluster-name=opkit",
        // --service-cluster-ip-range is not passed: kube-controller-manager reads it only with
        // --allocate-node-cidrs, and kwok nodes need no pod CIDR of their own.
        `--kube-api-qps=${s.settings.componentQps}`,
        `--kube-api-burst=${s.settings.componentBurst}`,
        ...gateFlag,
        "--profiling=false",
        "--v=1",
      ];
    }
    case "kube-scheduler": {
      const kc = kubeconfigFile(s.dir, "kube-scheduler");
      return [
        `--kubeconfig=${kc}`,
        `--authentication-kubeconfig=${kc}`,
        `--authorization-kubeconfig=${kc}`,
        `--secure-port=${s.ports["kube-scheduler"]}`,
        "--bind-address=127.0.0.1",
        "--leader-elect=false",
        `--kube-api-qps=${s.settings.componentQps}`,
        `--kube-api-burst=${s.settings.componentBurst}`,
        ...gateFlag,
        "--profiling=false",
        "--v=1",
      ];
    }
    case "kwok":
      return [
        `--kubeconfig=${kubeconfigFile(s.dir, "kwok")}`,
        `--config=${kwokConfigPath(s.dir)}`,
        `--manage-nodes-with-annotation-selector=${NODE_ANNOTATION}=fake`,
        `--server-address=127.0.0.1:${s.ports.kwok}`,
        "--cidr=10.244.0.0/16",
        "--node-ip=10.200.0.1",
        "--node-lease-duration-seconds=40",
        "--v=INFO",
      ];
    case "local-provisioner":
      return [
        provisionerScript(),
        `--kubeconfig=${kubeconfigFile(s.dir, "local-provisioner")}`,
        `--port=${s.ports["local-provisioner"]}`,
        `--volumes-dir=${join(s.dir, "volumes")}`,
      ];
  }
}
