/**
 * Commands that act on an operator project: load its definition (src/operator.ts), install its CRDs,
 * run it in the foreground, or run it in a development loop against a local control plane.
 */
import { Command } from "commander";
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync, watch } from "node:fs";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { KubeClient, NotFoundError, kindRef, type KubeObject, type OperatorDefinition } from "opkit";
import { crdFor } from "opkit/generate";
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

export function crdsOf(op: OperatorDefinition): KubeObject[] {
  return op.kinds.map((k) => crdFor(k as Parameters<typeof crdFor>[0]) as KubeObject);
}

async function clientFor(kubeconfig: string | undefined): Promise<KubeClient> {
  return KubeClient.load({ kubeconfig, fieldManager: "opkit-cli" });
}

export async function installCrds(dir: string, kubeconfig?: string): Promise<string[]> {
  const op = await loadOperator(dir);
  const client = await clientFor(kubeconfig);
  try {
    const names: string[] = [];
    for (const crd of crdsOf(op)) {
      await client.apply(crd, { force: true });
      names.push(crd.metadata.name ?? "");
    }
    return names;
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

/** Start `node src/main.ts` of a project; signals to this process are passed on. */
export function startOperator(dir: string, env: NodeJS.ProcessEnv): ChildProcess {
  return spawn(process.execPath, [join(resolve(dir), "src", "main.ts")], {
    cwd: resolve(dir),
    env,
    stdio: "inherit",
  });
}

function kubeconfigEnv(kubeconfig: string | undefined): NodeJS.ProcessEnv {
  return kubeconfig ? { ...process.env, KUBECONFIG: kubeconfig } : process.env;
}

export function operatorCommands(): Command[] {
  const install = new Command("install")
    .description("apply the project's CRDs to the current cluster")
    .argument("[dir]", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .action(async (dir: string, o: { kubeconfig?: string }) => {
      for (const n of await installCrds(dir, o.kubeconfig))
        console.log(`customresourcedefinition ${n} applied`);
    });

  const uninstall = new Command("uninstall")
    .description("delete the project's CRDs (and with them every object of those kinds)")
    .argument("[dir]", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .action(async (dir: string, o: { kubeconfig?: string }) => {
      for (const n of await uninstallCrds(dir, o.kubeconfig))
        console.log(`customresourcedefinition ${n} deleted`);
    });

  const run = new Command("run")
    .description("run the operator in the foreground against the current kubeconfig")
    .argument("[dir]", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .option("--install-crds", "apply the project's CRDs first")
    .action(async (dir: string, o: { kubeconfig?: string; installCrds?: boolean }) => {
      if (o.installCrds)
        for (const n of await installCrds(dir, o.kubeconfig)) process.stderr.write(`installed CRD ${n}\n`);
      const child = startOperator(dir, kubeconfigEnv(o.kubeconfig));
      const forward = (sig: NodeJS.Signals): void => void child.kill(sig);
      process.on("SIGINT", forward);
      process.on("SIGTERM", forward);
      const code = await new Promise<number>((r) => child.on("exit", (c, s) => r(c ?? (s ? 1 : 0))));
      process.exitCode = code;
    });

  const dev = new Command("dev")
    .description("local control plane + CRDs + run, restarting the operator when a source file changes")
    .argument("[dir]", "project directory", ".")
    .option("--name <name>", "opkit env name", "dev")
    .action(async (dir: string, o: { name: string }) => {
      const cp = new ControlPlane(o.name);
      const up = await cp.up({
        onBuildProgress: buildReporter(),
        onProgress: (m) => process.stderr.write(`${m}\n`),
      });
      process.stderr.write(`env "${o.name}" ready: ${up.kubeconfig}\n`);
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
        child = startOperator(dir, kubeconfigEnv(up.kubeconfig));
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
      process.stderr.write(
        `operator stopped; env "${o.name}" keeps running (opkit env down --name ${o.name} stops it)\n`,
      );
    });

  return [install, uninstall, run, dev];
}
