/**
 * An operator project (the layout `opkit init` makes: src/main.ts, generated config/crds and
 * config/rbac.yaml) run in a test the way it ships: its generated CRDs installed, its own process,
 * nothing but its generated RBAC, free ports for metrics and probes, JSON logs.
 */
import { readdir } from "node:fs/promises";
import { basename, join } from "node:path";
import type { KubeObject } from "../client/types.ts";
import { startOperatorProcess, type OperatorProcess } from "./operatorprocess.ts";
import { impersonateServiceAccount, readManifests, type ServiceAccountSession } from "./serviceaccount.ts";
import type { TestEnv } from "./testing.ts";

/**
 * An opkit project's operator set up for a test: its CRDs installed, its generated RBAC bound to a
 * ServiceAccount in a fresh namespace, and a way to start it as its own process under that identity, so the
 * test proves the RBAC is enough.
 */
export interface OperatorProject {
  /** The test namespace the operator's ServiceAccount (and its namespaced RBAC) live in. */
  readonly namespace: string;
  /** The ServiceAccount the operator runs as, with its kubeconfig. */
  readonly session: ServiceAccountSession;
  /**
   * Start `src/main.ts` as the ServiceAccount, with free metrics/probe ports, JSON logs and `args`;
   * resolves once its caches synced. Call again after a stop or kill to restart it. `opts.env` is added
   * to the process's environment (e.g. POD_NAMESPACE for the Lease of `--leader-elect`), and
   * `opts.kubeconfig` replaces the ServiceAccount's kubeconfig (e.g. one through a fault proxy that
   * still impersonates it), and `opts.entry` runs another file of the project (e.g. the `dist/main.js`
   * bundle of `opkit build`).
   */
  start(
    args?: readonly string[],
    opts?: { env?: Readonly<Record<string, string>>; kubeconfig?: string; entry?: string },
  ): Promise<OperatorProcess>;
  /** Stop every process started here and remove the ServiceAccount's cluster-scoped RBAC. */
  cleanup(): Promise<void>;
}

/**
 * Install the project's generated CRDs (none when it has no config/crds), create a test namespace
 * (named after `namespace`, default the project folder) and impersonate the project's generated
 * ServiceAccount in it.
 */
export async function operatorProject(
  env: TestEnv,
  root: string,
  opts: { namespace?: string } = {},
): Promise<OperatorProject> {
  const crds: KubeObject[] = [];
  const crdDir = join(root, "config", "crds");
  // A project without kinds of its own (a scheduler, a controller of built-in kinds) has no CRD folder.
  const entries = await readdir(crdDir, { withFileTypes: true }).catch((err: NodeJS.ErrnoException) => {
    if (err.code === "ENOENT") return [];
    throw err;
  });
  // Files only: config/crds/released/ holds the frozen API of the last release, not CRDs to install.
  const files = entries.filter((e) => e.isFile()).map((e) => e.name);
  for (const f of files.sort()) crds.push(...(await readManifests(join(crdDir, f))));
  if (crds.length) await env.installCrds(crds);
  const namespace = await env.namespace(opts.namespace ?? basename(root));
  const session = await impersonateServiceAccount(
    env,
    await readManifests(join(root, "config", "rbac.yaml")),
    namespace,
  );
  const started: OperatorProcess[] = [];
  return {
    namespace,
    session,
    async start(args = [], opts = {}) {
      const op = startOperatorProcess(join(root, opts.entry ?? join("src", "main.ts")), {
        env: opts.env,
        args: [
          "--kubeconfig",
          opts.kubeconfig ?? session.kubeconfigPath,
          "--metrics-bind-address=127.0.0.1:0",
          "--health-probe-bind-address=127.0.0.1:0",
          "--log-format=json",
          ...args,
        ],
      });
      started.push(op);
      await op.waitForLine(/caches synced/);
      return op;
    },
    async cleanup() {
      await Promise.all(started.map((op) => op.stop()));
      await session.cleanup();
    },
  };
}
