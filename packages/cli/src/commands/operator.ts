/**
 * Commands that act on an operator project: load its definition (src/operator.ts), install its CRDs,
 * run it in the foreground, or run it in a development loop against a local control plane.
 */
import { Command } from "commander";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, watch } from "node:fs";
import { connect as netConnect } from "node:net";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import {
  KubeClient,
  LocalWebhooks,
  installCrds as installCrdsAndWait,
  NotFoundError,
  kindRef,
  type KubeObject,
  type OperatorDefinition,
} from "opkit";
import { OPERATOR_NODE_FLAGS, crdsFor } from "opkit/generate";
import { ControlPlane } from "opkit/testenv";
import { UsageError } from "./project.ts";
import { buildReporter } from "./env.ts";

export async function loadOperator(dir: string): Promise<OperatorDefinition> {
  const file = join(resolve(dir), "src", "operator.ts");
  if (!existsSync(file))
    throw new UsageError(
      `${resolve(dir)} is not an opkit project (no src/operator.ts): run opkit init there`,
    );
  const mod = (await import(pathToFileURL(file).href)) as { default?: OperatorDefinition };
  if (!mod.default?.name || !Array.isArray(mod.default.kinds)) {
    throw new UsageError(`src/operator.ts must export default defineOperator({ name, kinds, controllers })`);
  }
  return mod.default;
}

/** The project's CRDs, one per kind with all of its versions (as `opkit generate` writes them). */
export function crdsOf(op: OperatorDefinition): KubeObject[] {
  return crdsFor(op.kinds as Parameters<typeof crdsFor>[0]);
}

async function clientFor(kubeconfig: string | undefined): Promise<KubeClient> {
  return KubeClient.load({ kubeconfig, fieldManager: "opkit-cli" });
}

export async function installCrds(dir: string, kubeconfig?: string): Promise<string[]> {
  const op = await loadOperator(dir);
  const client = await clientFor(kubeconfig);
  try {
    // Waits until served: an operator started on a CRD applied a moment ago would get 404/429 first.
    const crds = crdsOf(op);
    await installCrdsAndWait(client, crds);
    return crds.map((crd) => crd.metadata.name ?? "");
  } finally {
    await client.close();
  }
}

export async function uninstallCrds(dir: string, kubeconfig?: string): Promise<string[]> {
  const op = await loadOperator(dir);
  const client = await clientFor(kubeconfig);
  const Crds = kindRef("apiextensions.k8s.io/v1", "CustomResourceDefinition");
  try {
    const names: string[] = [];
    for (const crd of crdsOf(op)) {
      try {
        await client.delete(Crds, crd.metadata.name ?? "");
        names.push(crd.metadata.name ?? "");
      } catch (err) {
        if (!(err instanceof NotFoundError)) throw err;
      }
    }
    return names;
  } finally {
    await client.close();
  }
}

/**
 * Local runs serve metrics and probes on free loopback ports (logged at start), so two operators on one
 * machine never collide on :8080/:8081; flags given after `--` come later and win.
 */
export const LOCAL_OPERATOR_FLAGS: readonly string[] = [
  "--metrics-bind-address=127.0.0.1:0",
  "--health-probe-bind-address=127.0.0.1:0",
];

/**
 * Start `node src/main.ts` of a project with `args`, with the Node flags of the image (OPERATOR_NODE_FLAGS). The child gets an IPC channel: if this process dies
 * (even by SIGKILL) the channel closes and the operator stops too, so no operator is left orphaned.
 */
export function startOperator(
  dir: string,
  env: NodeJS.ProcessEnv,
  args: readonly string[] = [],
): ChildProcess {
  const entry = join(resolve(dir), "src", "main.ts");
  return spawn(process.execPath, [...OPERATOR_NODE_FLAGS, entry, ...LOCAL_OPERATOR_FLAGS, ...args], {
    cwd: resolve(dir),
    env,
    stdio: ["inherit", "inherit", "inherit", "ipc"],
  });
}

function kubeconfigEnv(kubeconfig: string | undefined): NodeJS.ProcessEnv {
  return kubeconfig ? { ...process.env, KUBECONFIG: kubeconfig } : process.env;
}

/** The local webhook set-up of `run --local-webhooks` and `dev`: what the operator needs, and its undo. */
export interface LocalWebhookSession {
  /** Environment for the operator process: where to listen and which certificate to serve. */
  env: NodeJS.ProcessEnv;
  /**
   * Wait until the operator serves on the port (while `alive()`), then register the configurations
   * (again after CRDs were re-applied, which resets their conversion to None). False when it gave up.
   */
  register(alive: () => boolean): Promise<boolean>;
  /** Remove the configurations (and CRD conversion) from the cluster and delete the certificate. */
  cleanup(): Promise<void>;
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = netConnect({ host, port });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * Generate a CA and serving certificate and choose a free port on 127.0.0.1 for the operator; its
 * `register` points the project's webhook configurations (named `<operator>-local`) there once the
 * operator listens, so the API server is never sent to a port nobody serves yet. Undefined when the
 * project has no webhooks.
 */
export async function prepareLocalWebhookSession(
  dir: string,
  kubeconfig: string | undefined,
): Promise<LocalWebhookSession | undefined> {
  const op = await loadOperator(dir);
  const handlers = op.webhooks ?? [];
  if (handlers.length === 0) return undefined;
  const local = await LocalWebhooks.prepare();
  const client = await clientFor(kubeconfig);
  const name = `${op.name}-local`;
  let closed = false;
  let pending: Promise<boolean> = Promise.resolve(false);
  let done: Promise<void> | undefined;
  const register = async (alive: () => boolean): Promise<boolean> => {
    const deadline = Date.now() + 120_000;
    while (!closed && alive() && !(await accepts(local.host, local.port))) {
      if (Date.now() > deadline) {
        process.stderr.write(
          `the operator did not listen on ${local.url} within 120 s; webhooks not registered\n`,
        );
        return false;
      }
      await new Promise((r) => setTimeout(r, 200));
    }
    if (closed || !alive()) return false;
    await local.register(client, name, handlers);
    process.stderr.write(
      `webhooks registered as ${name}: ${local.url} (${handlers.map((h) => h.path).join(", ")}), CA ${local.certificate.caFile}\n`,
    );
    return true;
  };
  return {
    env: {
      OPKIT_WEBHOOK_BIND_ADDRESS: `${local.host}:${local.port}`,
      OPKIT_WEBHOOK_CERT_DIR: local.certDir,
    },
    register(alive) {
      pending = pending.catch(() => false).then(() => register(alive));
      return pending;
    },
    cleanup() {
      closed = true;
      done ??= (async () => {
        // A registration in flight finishes first, so none is left behind.
        await pending.catch(() => false);
        try {
          await local.unregister(client, name, handlers);
          process.stderr.write(`webhook configurations ${name} removed\n`);
        } finally {
          await local.dispose();
          await client.close();
        }
      })();
      return done;
    },
  };
}

function reportRegistration(p: Promise<boolean> | undefined): void {
  p?.catch((err: unknown) =>
    process.stderr.write(
      `could not register webhooks: ${err instanceof Error ? err.message : String(err)}\n`,
    ),
  );
}

export function operatorCommands(): Command[] {
  // Long on purpose: commander definitions, one chained call per command and option.
  const install = new Command("install")
    .description("apply the project's CRDs to the current cluster")
    .option("--dir <dir>", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .action(async (o: { dir: string; kubeconfig?: string }) => {
      for (const n of await installCrds(o.dir, o.kubeconfig))
        console.log(`customresourcedefinition ${n} applied`);
    });

  const uninstall = new Command("uninstall")
    .description("delete the project's CRDs (and with them every object of those kinds)")
    .option("--dir <dir>", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .action(async (o: { dir: string; kubeconfig?: string }) => {
      for (const n of await uninstallCrds(o.dir, o.kubeconfig))
        console.log(`customresourcedefinition ${n} deleted`);
    });

  const run = new Command("run")
    .description(
      "run the operator in the foreground against the current kubeconfig; flags after -- go to the operator (e.g. -- --log-level debug)",
    )
    .argument("[operatorFlags...]", "the operator's own flags, after --, e.g. -- --log-level debug")
    .option("--dir <dir>", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .option("--install-crds", "apply the project's CRDs first")
    .option(
      "--shards <n>",
      "run as one replica of a sharded operator with this many shards (passed on as the operator's --shards)",
    )
    .option(
      "--metrics-bind-address <addr>",
      'the operator\'s /metrics address, e.g. ":0" for a free port, so replicas can run side by side',
    )
    .option("--health-probe-bind-address <addr>", "the operator's /healthz and /readyz address (same syntax)")
    .option(
      "--local-webhooks",
      "serve the webhooks from this machine: generate a certificate and register the configurations in the cluster, pointing at the operator; removed when it stops",
    )
    .action(
      async (
        rest: string[],
        o: {
          dir: string;
          kubeconfig?: string;
          installCrds?: boolean;
          localWebhooks?: boolean;
          shards?: string;
          metricsBindAddress?: string;
          healthProbeBindAddress?: string;
        },
      ) => {
        const dir = o.dir;
        // Validated by the operator itself, which names the flag on a bad value.
        const args = [
          ...(o.shards !== undefined ? ["--shards", o.shards] : []),
          ...(o.metricsBindAddress !== undefined ? ["--metrics-bind-address", o.metricsBindAddress] : []),
          ...(o.healthProbeBindAddress !== undefined
            ? ["--health-probe-bind-address", o.healthProbeBindAddress]
            : []),
          ...rest,
        ];
        if (o.installCrds)
          for (const n of await installCrds(dir, o.kubeconfig)) process.stderr.write(`installed CRD ${n}\n`);
        const hooks = o.localWebhooks ? await prepareLocalWebhookSession(dir, o.kubeconfig) : undefined;
        if (o.localWebhooks && !hooks)
          process.stderr.write("--local-webhooks: the operator defines no webhooks\n");
        const child = startOperator(dir, { ...kubeconfigEnv(o.kubeconfig), ...hooks?.env }, args);
        reportRegistration(hooks?.register(() => child.exitCode === null && child.signalCode === null));
        const forward = (sig: NodeJS.Signals): void => void child.kill(sig);
        process.on("SIGINT", forward);
        process.on("SIGTERM", forward);
        const code = await new Promise<number>((r) => child.on("exit", (c, s) => r(c ?? (s ? 1 : 0))));
        // Also after a crash: a configuration left pointing at a stopped server would refuse every write.
        await hooks?.cleanup();
        process.exitCode = code;
      },
    );

  const dev = new Command("dev")
    .description(
      "local control plane + CRDs + local webhooks + run, restarting the operator when a source file changes",
    )
    .argument("[operatorFlags...]", "the operator's own flags, after --, e.g. -- --log-level debug")
    .option("--dir <dir>", "project directory", ".")
    .option("--name <name>", "opkit env name", "dev")
    .action(async (args: string[], o: { dir: string; name: string }) => {
      const dir = o.dir;
      const cp = new ControlPlane(o.name);
      const up = await cp.up({
        onBuildProgress: buildReporter(),
        onProgress: (m) => process.stderr.write(`${m}\n`),
      });
      process.stderr.write(`env "${o.name}" ready: ${up.kubeconfig}\n`);
      // The certificate and port stay the same across restarts.
      const hooks = await prepareLocalWebhookSession(dir, up.kubeconfig);
      let child: ChildProcess | undefined;
      let stopping = false;
      const restart = async (): Promise<void> => {
        if (child && child.exitCode === null) {
          const exited = new Promise((r) => child?.once("exit", r));
          child.kill("SIGTERM");
          await exited;
        }
        if (stopping) return;
        try {
          for (const n of await installCrds(dir, up.kubeconfig)) process.stderr.write(`installed CRD ${n}\n`);
        } catch (err) {
          process.stderr.write(
            `could not install CRDs: ${err instanceof Error ? err.message : String(err)}\n`,
          );
        }
        const started = startOperator(dir, { ...kubeconfigEnv(up.kubeconfig), ...hooks?.env }, args);
        child = started;
        // Installing the CRDs reset their conversion: register again once this operator listens.
        reportRegistration(hooks?.register(() => started.exitCode === null && started.signalCode === null));
      };
      let timer: NodeJS.Timeout | undefined;
      const watcher = watch(join(resolve(dir), "src"), { recursive: true }, () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          process.stderr.write("source changed: restarting the operator\n");
          void restart();
        }, 300);
      });
      await restart();
      await new Promise<void>((resolveStop) => {
        const stop = (): void => {
          stopping = true;
          watcher.close();
          clearTimeout(timer);
          if (child && child.exitCode === null) child.once("exit", () => resolveStop());
          else resolveStop();
          child?.kill("SIGTERM");
        };
        process.once("SIGINT", stop);
        process.once("SIGTERM", stop);
      });
      await hooks?.cleanup();
      process.stderr.write(
        `operator stopped; env "${o.name}" keeps running (opkit env down --name ${o.name} stops it)\n`,
      );
    });

  return [install, uninstall, run, dev];
}
