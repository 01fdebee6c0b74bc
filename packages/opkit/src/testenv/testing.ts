/**
 * The test helper (opkit's envtest): one control plane shared by every test file of a run, a fresh
 * namespace per test, CRD installation, fault-injection hooks, and cleanup that happens even when tests
 * fail or the run is interrupted.
 *
 * `make test` starts the shared env once in node:test's global setup (global-setup.ts) and passes its
 * name in `OPKIT_TEST_ENV`. A test file run on its own (`node --test x.int.test.ts`) starts a private
 * env instead, owned by its process and guarded by a watchdog.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { fileURLToPath } from "node:url";
import { KubeClient } from "../client/client.ts";
import { installCrds } from "../client/crds.ts";
import { NotFoundError } from "../client/errors.ts";
import { kindRef, type KubeObject } from "../client/types.ts";
import type { Node } from "../client/builtins.ts";
import { COMPONENTS, ControlPlane, type ComponentName, type UpOptions } from "./controlplane.ts";
import type { NodeSpec } from "./nodes.ts";
import { isRunning } from "./processes.ts";
import { kubeConfigVia, startTcpProxy, type TcpProxy } from "./proxy.ts";
import type { EnvOptions } from "./settings.ts";
import { KUBERNETES_VERSION } from "./versions.ts";
import type { ClusterConfig } from "../client/config.ts";

/**
 * The environment variable naming the running env tests should use (`OPKIT_TEST_ENV=<name>`); without it a
 * test file starts its own.
 */
export const TEST_ENV_VARIABLE = "OPKIT_TEST_ENV";

/**
 * How test envs start (the shared one of `make test` and a lone test file's own): 3 nodes, and the
 * alpha ShardedListAndWatch gate on, so tests of shard-scoped informers run against the real server
 * filter (KEP-5866). Releases before 1.36 lack the gate: it is left out there, with a note. The release is
 * `OPKIT_KUBERNETES_VERSION`'s, else the default.
 */
export const TEST_ENV_OPTIONS: Readonly<EnvOptions> = Object.freeze({
  nodes: 3,
  featureGates: Object.freeze({ ShardedListAndWatch: true }),
});

/**
 * What `useTestEnv` gives a test: the shared env, an admin client, and helpers for namespaces, CRDs, nodes
 * and faults that clean up after themselves.
 */
export interface TestEnv {
  /** The env's name. */
  readonly name: string;
  /** The control plane, for status and fault injection. */
  readonly controlPlane: ControlPlane;
  /** Path of the admin kubeconfig, e.g. to pass to an operator process. */
  readonly kubeconfigPath: string;
  /** The admin client shared by the tests of this process. */
  readonly client: KubeClient;
  /** The Kubernetes release the env runs, e.g. "v1.36.3" (chosen by `OPKIT_KUBERNETES_VERSION` or the option). */
  readonly kubernetesVersion: string;
  /** The feature gates the env's components run with: the requested ones its release has. */
  readonly featureGates: Readonly<Record<string, boolean>>;
  /**
   * Whether the env has what a test needs (a minimum release such as "1.35", a feature gate that is on);
   * when not, the test is skipped with the reason, which is also printed, so a gap on an older release is
   * visible, never passed silently. Returns false when it skipped.
   */
  requires(t: SkippableTest, need: Requirement): boolean;
  /** Create a namespace with a unique name (prefix + random suffix); deleted by `cleanup`. */
  namespace(prefix?: string): Promise<string>;
  /** Create or update CRDs and wait until the API server serves them. */
  /** Apply CRDs and wait until each is Established and every served version answers (see `installCrds`). */
  installCrds(crds: KubeObject[]): Promise<void>;
  /** Stop and start one component, e.g. to test that an operator survives an API server restart. */
  restart(component: ComponentName): Promise<void>;
  /**
   * Add simulated nodes (sizes, labels, taints) and wait until they are Ready; removed by `cleanup`.
   * Give them a taint when other tests share the env, so only pods that tolerate it land there.
   */
  addNodes(specs: NodeSpec[]): Promise<Node[]>;
  /**
   * A TCP proxy in front of kube-apiserver and a kubeconfig that goes through it, for dropped-connection
   * and partition faults that touch only the clients built from that kubeconfig.
   */
  apiserverProxy(): Promise<{
    /** The proxy, to drop, freeze or partition connections. */
    proxy: TcpProxy;
    /** A client configuration that goes through the proxy. */
    kubeConfig: ClusterConfig;
  }>;
  /**
   * Compact etcd so watches from older resource versions get 410 Gone: tests that relists recover. Restarts
   * the API server unless told not to, so the compaction is visible at once.
   */
  compact(opts?: { restartApiserver?: boolean }): Promise<{
    /** The etcd revision compacted to. */
    revision: number;
  }>;
  /** Delete this process's namespaces and nodes; stops the env too when this process owns it. */
  cleanup(): Promise<void>;
}

/** What `TestEnv.requires` needs of a test: node:test's `TestContext` has it. */
export interface SkippableTest {
  /** Marks the test skipped, with the reason. */
  skip(message?: string): void;
}

/** What a test needs of the env's Kubernetes release. */
export interface Requirement {
  /** The oldest release that has what the test uses, as a minor: "1.35". */
  minVersion?: string;
  /** A feature gate that must be on (e.g. "ShardedListAndWatch", alpha in 1.36). */
  featureGate?: string;
  /** What the test uses, for the skip message, e.g. "field selectors on CRDs". */
  what?: string;
}

/**
 * Why an env of `version` with `gates` cannot run a test needing `need`, or undefined when it can. Pure, so the
 * rule is unit-tested.
 */
export function missingRequirement(
  version: string,
  gates: Readonly<Record<string, boolean>>,
  need: Requirement,
): string | undefined {
  const what = need.what ? `${need.what}: ` : "";
  if (need.minVersion && compareMinor(version, need.minVersion) < 0)
    return `${what}needs Kubernetes ${need.minVersion}+, the env runs ${version}`;
  if (need.featureGate && gates[need.featureGate] !== true)
    return `${what}needs the feature gate ${need.featureGate}, which the env's ${version} ${gates[need.featureGate] === false ? "has off" : "lacks"}`;
  return undefined;
}

/** Compare the minor of two versions ("v1.34.4" against "1.35"): negative, zero or positive. */
function compareMinor(a: string, b: string): number {
  const parse = (v: string): number[] => v.replace(/^v/, "").split(".").slice(0, 2).map(Number);
  const [am = 0, an = 0] = parse(a);
  const [bm = 0, bn = 0] = parse(b);
  return am !== bm ? am - bm : an - bn;
}

const Namespaces = kindRef<KubeObject>("v1", "Namespace");

let shared: Promise<TestEnv> | undefined;

/**
 * The env for this test run: the shared one named in OPKIT_TEST_ENV, or a private one owned by this
 * process. Call it from any test file; every call in one process returns the same env. The options
 * shape a private env only; a shared env is as the run started it.
 */
export function useTestEnv(opts: EnvOptions = {}): Promise<TestEnv> {
  shared ??= openTestEnv(opts);
  return shared;
}

async function openTestEnv(opts: EnvOptions): Promise<TestEnv> {
  // Long on purpose: the TestEnv's methods close over its one client and the namespaces and nodes it cleans up.
  const sharedName = process.env[TEST_ENV_VARIABLE];
  let cp: ControlPlane;
  let owned = false;
  if (sharedName) {
    cp = new ControlPlane(sharedName);
    if (!(await cp.isRunning())) {
      const state = await cp.state();
      const down = state
        ? COMPONENTS.filter((c) => {
            const p = state.components[c];
            return !p || !isRunning(p.pid, p.exe, p.args);
          })
        : [];
      throw new Error(
        `the shared test env "${sharedName}" (${TEST_ENV_VARIABLE}) is not running` +
          (down.length ? ` (not running: ${down.join(", ")})` : "") +
          `: start it again with \`opkit env down --name ${sharedName} && opkit env up --name ${sharedName}\``,
      );
    }
  } else {
    cp = await startOwnedEnv(`test-${process.pid}-${randomBytes(2).toString("hex")}`, {
      ...TEST_ENV_OPTIONS,
      ...opts,
    });
    owned = true;
  }
  const client = await KubeClient.load({ kubeconfig: cp.kubeconfigPath, fieldManager: "opkit-test" });
  const state = await cp.state();
  const kubernetesVersion = state?.kubernetesVersion ?? KUBERNETES_VERSION;
  const featureGates = Object.freeze({ ...(state?.settings.featureGates ?? {}) });
  const namespaces: string[] = [];
  const nodes: string[] = [];
  const env: TestEnv = {
    name: cp.name,
    controlPlane: cp,
    kubeconfigPath: cp.kubeconfigPath,
    client,
    kubernetesVersion,
    featureGates,
    requires(t, need) {
      const missing = missingRequirement(kubernetesVersion, featureGates, need);
      if (missing === undefined) return true;
      process.stderr.write(`skipped on Kubernetes ${kubernetesVersion}: ${missing}\n`);
      t.skip(missing);
      return false;
    },
    async namespace(prefix = "t") {
      const name = `${prefix
        .toLowerCase()
        .replace(/[^a-z0-9-]/g, "-")
        .slice(0, 40)}-${randomBytes(3).toString("hex")}`;
      await client.create({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
      namespaces.push(name);
      return name;
    },
    installCrds: (crds) => installCrds(client, crds),
    restart: (c) => cp.restart(c),
    async addNodes(specs) {
      nodes.push(...specs.map((s) => s.name));
      return cp.addNodes(specs);
    },
    async apiserverProxy() {
      const port = (await cp.state())?.ports["kube-apiserver"];
      if (!port) throw new Error(`env ${cp.name} has no kube-apiserver port recorded`);
      const proxy = await startTcpProxy(port);
      return { proxy, kubeConfig: await kubeConfigVia(cp.kubeconfigPath, proxy.port) };
    },
    compact: (o) => cp.compact(o),
    async cleanup() {
      if (owned) {
        await client.close();
        await cp.down();
        return;
      }
      await cp.removeNodes(nodes.splice(0));
      for (const ns of namespaces.splice(0)) {
        try {
          await client.delete(Namespaces, ns);
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
        }
      }
      await client.close();
    },
  };
  return env;
}

/**
 * Start an env owned by this process: a detached watchdog stops it when this process exits for any
 * reason, and SIGINT/SIGTERM stop it before exiting.
 */
export async function startOwnedEnv(name: string, options: number | UpOptions = {}): Promise<ControlPlane> {
  const cp = new ControlPlane(name);
  const here = fileURLToPath(import.meta.url);
  const watchdog = here.replace(/testing\.(ts|js)$/, "watchdog.$1");
  const onSignal = (sig: NodeJS.Signals): void => {
    void cp.down().finally(() => process.kill(process.pid, sig));
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const up = await cp.up(typeof options === "number" ? { nodes: options } : options);
  // What the release lacks of the requested settings: visible in the test output, not only in the state.
  for (const n of up.notes)
    process.stderr.write(`opkit env "${name}" (Kubernetes ${up.kubernetesVersion}): ${n}\n`);
  const child = spawn(process.execPath, [watchdog, String(process.pid), name], {
    detached: true,
    stdio: "ignore",
  });
  child.unref();
  return cp;
}
