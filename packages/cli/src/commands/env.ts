/**
 * `opkit env …`: the local control plane. Each subcommand is a thin call into opkit/testenv.
 */
import { Command, InvalidArgumentError } from "commander";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import {
  COMPONENTS,
  ControlPlane,
  DEFAULT_MAX_PODS,
  DEFAULT_NODE_CPU,
  DEFAULT_NODE_MEMORY,
  DEFAULT_NODES,
  DEFAULT_STORAGE_CLASS,
  KUBERNETES_VERSION,
  KUBERNETES_VERSION_VARIABLE,
  ETCD_VERSION,
  KWOK_VERSION,
  SUPPORTED_KUBERNETES_VERSIONS,
  binDir,
  buildControlPlane,
  missingBinaries,
  pruneBuilds,
  resolveKubernetesVersion,
  type BuildProgress,
  type ComponentName,
} from "opkit/testenv";

function component(value: string): ComponentName {
  if (!(COMPONENTS as readonly string[]).includes(value)) {
    throw new InvalidArgumentError(`unknown component "${value}": choose one of ${COMPONENTS.join(", ")}`);
  }
  return value as ComponentName;
}

function positiveInt(value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new InvalidArgumentError(`expected a whole number ≥ 0, got "${value}"`);
  return n;
}

const secs = (ms: number): string => `${(ms / 1000).toFixed(1)}s`;

/** Progress lines for the long build, with a ticking elapsed time on a terminal. */
export function buildReporter(): (p: BuildProgress) => void {
  let timer: NodeJS.Timeout | undefined;
  return (p) => {
    if (timer) clearInterval(timer);
    timer = undefined;
    if (p.state === "cached") return;
    if (p.state === "start") {
      const t = Date.now();
      process.stderr.write(`building ${p.step} …\n`);
      timer = setInterval(
        () => process.stderr.write(`  ${p.step}: ${secs(Date.now() - t)} elapsed\n`),
        30_000,
      );
      timer.unref();
    } else process.stderr.write(`built ${p.step} in ${secs(p.elapsedMs)}\n`);
  };
}

const versionOpt = [
  "--kubernetes-version <version>",
  `the Kubernetes release: ${SUPPORTED_KUBERNETES_VERSIONS.map((v) => v.replace(/^v(\d+\.\d+)\..*$/, "$1")).join(", ")} ` +
    `(a minor picks its tested patch) or a full version such as v1.34.2; default $${KUBERNETES_VERSION_VARIABLE}, else ${KUBERNETES_VERSION}`,
] as const;

const mb = (bytes: number): string => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

export function envCommand(): Command {
  // Long on purpose: commander definitions, one chained call per command and option.
  const env = new Command("env").description(
    `a real local Kubernetes control plane (Kubernetes ${SUPPORTED_KUBERNETES_VERSIONS.join(", ")}; default ${KUBERNETES_VERSION}; etcd ${ETCD_VERSION}, kwok ${KWOK_VERSION})`,
  );
  const nameOpt = ["--name <name>", "environment name (several can run side by side)", "default"] as const;

  env
    .command("build")
    .description(
      "build etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl and kwok from Go modules",
    )
    .option("--force", "rebuild even if cached")
    .option(...versionOpt)
    .action(async (o: { force?: boolean; kubernetesVersion?: string }) => {
      const kubernetesVersion = resolveKubernetesVersion(o.kubernetesVersion);
      const r = await buildControlPlane({ force: o.force, kubernetesVersion, onProgress: buildReporter() });
      console.log(
        r.built.length
          ? `built Kubernetes ${r.kubernetesVersion} (${r.built.join(", ")}) in ${secs(r.elapsedMs)} → ${r.binDir}`
          : `up to date: Kubernetes ${r.kubernetesVersion} in ${r.binDir}`,
      );
    });

  env
    .command("versions")
    .description("list the supported Kubernetes releases and which are built")
    .action(() => {
      for (const v of SUPPORTED_KUBERNETES_VERSIONS) {
        const built = missingBinaries(v).length === 0;
        console.log(
          `${v.padEnd(10)}${(v === KUBERNETES_VERSION ? "default" : "").padEnd(9)}${built ? `built ${binDir(v)}` : "not built (opkit env build --kubernetes-version " + v + ")"}`,
        );
      }
    });

  env
    .command("prune")
    .description(
      `remove the cached builds of Kubernetes releases no env uses (the default ${KUBERNETES_VERSION} stays unless --all)`,
    )
    .option("--all", "also remove the default release's build when no env uses it")
    .option("--dry-run", "only say what would be removed")
    .action(async (o: { all?: boolean; dryRun?: boolean }) => {
      const r = await pruneBuilds({ all: o.all, dryRun: o.dryRun });
      for (const k of r.kept) console.log(`kept     ${k.path} (${mb(k.bytes)}): ${k.reason}`);
      for (const k of r.removed)
        console.log(`${o.dryRun ? "would rm" : "removed "} ${k.path} (${mb(k.bytes)})`);
      const freed = r.removed.reduce((n, k) => n + k.bytes, 0);
      console.log(`${o.dryRun ? "would free" : "freed"} ${mb(freed)}`);
    });

  env
    .command("up")
    .description(
      "start the control plane in the background (builds first if needed) and print the kubeconfig path",
    )
    .option(...nameOpt)
    .option("--nodes <n>", "number of simulated Ready nodes", positiveInt, DEFAULT_NODES)
    .option("--max-pods <n>", "pod capacity of each node", positiveInt, DEFAULT_MAX_PODS)
    .option("--node-cpu <quantity>", "CPU capacity of each node", DEFAULT_NODE_CPU)
    .option("--node-memory <quantity>", "memory capacity of each node", DEFAULT_NODE_MEMORY)
    .option(
      "--feature-gates <gates>",
      "feature gates for kube-apiserver, kube-controller-manager and kube-scheduler, e.g. ShardedListAndWatch=true",
      "",
    )
    .option(
      "--runtime-config <apis>",
      "API group/versions kube-apiserver serves beyond its defaults, e.g. storagemigration.k8s.io/v1beta1=true (with --feature-gates StorageVersionMigrator=true on 1.36)",
      "",
    )
    .option(...versionOpt)
    .addHelpText(
      "after",
      `\nThe env has a default StorageClass "${DEFAULT_STORAGE_CLASS}" whose claims get local volumes, a /16 Service range\n` +
        "and kube-controller-manager / kube-scheduler at 200 qps (burst 400). Restarts keep the feature gates.",
    )
    .action(
      async (o: {
        name: string;
        nodes: number;
        maxPods: number;
        nodeCpu: string;
        nodeMemory: string;
        featureGates: string;
        runtimeConfig: string;
        kubernetesVersion?: string;
      }) => {
        const cp = new ControlPlane(o.name);
        const r = await cp.up({
          kubernetesVersion: o.kubernetesVersion,
          nodes: o.nodes,
          maxPods: o.maxPods,
          nodeCpu: o.nodeCpu,
          nodeMemory: o.nodeMemory,
          featureGates: o.featureGates,
          runtimeConfig: o.runtimeConfig,
          onBuildProgress: buildReporter(),
          onProgress: (m) => process.stderr.write(`${m}\n`),
        });
        if (r.alreadyRunning) {
          process.stderr.write(`env "${o.name}" is already running\n`);
          if (r.differences.length) {
            process.stderr.write(
              `it keeps its settings; run \`opkit env down${o.name === "default" ? "" : ` --name ${o.name}`}\` first to change:\n` +
                r.differences.map((d) => `  ${d}\n`).join(""),
            );
          }
        } else
          process.stderr.write(
            `env "${o.name}" (Kubernetes ${r.kubernetesVersion}) is up in ${secs(r.elapsedMs)}\n`,
          );
        console.log(r.kubeconfig);
      },
    );

  env
    .command("down")
    .description("stop every process of the environment and remove its state")
    .option(...nameOpt)
    .action(async (o: { name: string }) => {
      await new ControlPlane(o.name).down();
      process.stderr.write(`env "${o.name}" is down\n`);
    });

  env
    .command("kubeconfig")
    .description("print the admin kubeconfig path")
    .option(...nameOpt)
    .action(async (o: { name: string }) => {
      const cp = new ControlPlane(o.name);
      if (!(await cp.state())) throw new Error(`no env "${o.name}": start it with \`opkit env up\``);
      console.log(cp.kubeconfigPath);
    });

  env
    .command("status")
    .description("show each component: PID, port, health")
    .option(...nameOpt)
    .action(async (o: { name: string }) => {
      const rows = await new ControlPlane(o.name).status();
      console.log(
        ["COMPONENT", "PID", "PORT", "HEALTH"].map((h, i) => h.padEnd([25, 9, 7, 0][i] ?? 0)).join(""),
      );
      for (const r of rows) {
        console.log(
          `${r.name.padEnd(25)}${String(r.pid ?? "-").padEnd(9)}${String(r.port).padEnd(7)}${r.healthy ? "healthy" : r.detail}`,
        );
      }
      if (rows.some((r) => !r.healthy)) process.exitCode = 1;
    });

  env
    .command("logs")
    .description(`print a component's log (${COMPONENTS.join(", ")})`)
    .argument("<component>", `the component: ${COMPONENTS.join(", ")}`)
    .option(...nameOpt)
    .action(async (c: string, o: { name: string }) => {
      const { readFile } = await import("node:fs/promises");
      process.stdout.write(await readFile(new ControlPlane(o.name).logFile(component(c)), "utf8"));
    });

  for (const verb of ["restart", "stop", "start"] as const) {
    env
      .command(verb)
      .description(`${verb} one component, keeping its ports and data (fault injection)`)
      .argument("<component>", `the component: ${COMPONENTS.join(", ")}`)
      .option(...nameOpt)
      .action(async (c: string, o: { name: string }) => {
        const cp = new ControlPlane(o.name);
        await cp[verb](component(c));
        process.stderr.write(`${c}: ${verb} done\n`);
      });
  }

  env
    .command("compact")
    .description(
      "compact etcd to its current revision and defragment, so watches on old resource versions get 410 Gone",
    )
    .option(...nameOpt)
    .option(
      "--no-restart-apiserver",
      "keep kube-apiserver running (its watch cache then serves recent history for a while)",
    )
    .action(async (o: { name: string; restartApiserver: boolean }) => {
      const r = await new ControlPlane(o.name).compact({ restartApiserver: o.restartApiserver });
      console.log(`compacted etcd at revision ${r.revision}`);
    });

  env
    .command("kubectl")
    .description(
      "run the kubectl built with the control plane against the environment: opkit env kubectl -- get pods",
    )
    .option(...nameOpt)
    .argument("[args...]", "kubectl's arguments, after --, e.g. -- get pods -A")
    .allowUnknownOption()
    .action(async (args: string[], o: { name: string }) => {
      const cp = new ControlPlane(o.name);
      const version = (await cp.state())?.kubernetesVersion;
      const r = spawnSync(join(binDir(version), "kubectl"), ["--kubeconfig", cp.kubeconfigPath, ...args], {
        stdio: "inherit",
      });
      process.exitCode = r.status ?? 1;
    });

  env
    .command("path")
    .description("print the directory of the built binaries")
    .option(...versionOpt)
    .action((o: { kubernetesVersion?: string }) => {
      console.log(binDir(resolveKubernetesVersion(o.kubernetesVersion)));
    });

  return env;
}
