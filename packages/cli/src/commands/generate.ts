/**
 * `opkit generate`, `opkit deploy`, `opkit undeploy`: everything derived from the project's single
 * definition (src/operator.ts) — CRDs, least-privilege RBAC, deployment manifests as a kustomize
 * directory and a Helm chart, the Dockerfile. Idempotent: an unchanged project regenerates to the
 * same bytes and no file is rewritten.
 */
import { Command } from "commander";
import { existsSync } from "node:fs";
import { readFile, readdir, stat } from "node:fs/promises";
import { join, resolve } from "node:path";
import { KubeClient, NotFoundError, type KubeObject, type OperatorDefinition } from "opkit";
import type { KindDefinition } from "opkit";
import {
  builtinResolver,
  crdsFor,
  dockerfile,
  dockerignore,
  manifestsFor,
  rbacFor,
  writeHelmChart,
  writeIfChanged,
  writeKustomize,
} from "opkit/generate";
import { loadOperator } from "./operator.ts";

export interface GenerateOptions {
  image?: string;
  replicas?: number;
}

/** The complete object set of a project, in apply order (CRDs and namespace first). */
export async function projectObjects(
  op: OperatorDefinition,
  opts: GenerateOptions = {},
): Promise<KubeObject[]> {
  const defs = op.kinds as readonly KindDefinition[];
  const namespace = op.namespace ?? `${op.name}-system`;
  const rbac = await rbacFor({
    name: op.name,
    namespace,
    controllers: op.controllers.map((make) => make()),
    extraRules: op.extraRules,
    leaderElection: true,
    watchNamespace: op.watchNamespace,
    resolve: builtinResolver(
      defs.map((d) => ({ group: d.group, plural: d.plural, scope: d.scope, kind: d.kind })),
    ),
  });
  return manifestsFor({
    name: op.name,
    namespace,
    image: opts.image ?? op.image ?? `${op.name}:latest`,
    replicas: opts.replicas ?? 1,
    rbac,
    crds: crdsFor(defs),
  });
}

/** Contents of the generated files, to report which ones a run changed. */
async function snapshot(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const sub of ["config", "chart", "Dockerfile", ".dockerignore"]) {
    const path = join(root, sub);
    if (!existsSync(path)) continue;
    const files = (await stat(path)).isDirectory()
      ? (await readdir(path, { recursive: true })).map((f) => join(sub, f))
      : [sub];
    for (const f of files) {
      if ((await stat(join(root, f))).isFile()) out.set(f, await readFile(join(root, f), "utf8"));
    }
  }
  return out;
}

/** Generate everything; returns the files whose content changed (none on an unchanged project). */
export async function generateProject(dir: string, opts: GenerateOptions = {}): Promise<string[]> {
  const root = resolve(dir);
  const op = await loadOperator(root);
  const objects = await projectObjects(op, opts);
  const before = await snapshot(root);
  await writeKustomize(join(root, "config"), objects);
  await writeHelmChart(join(root, "chart"), {
    name: op.name,
    version: "0.1.0",
    appVersion: "0.1.0",
    objects,
  });
  // Projects run their TypeScript directly on Node 24; the "build" script type-checks.
  const recipe = dockerfile({ entrypoint: "src/main.ts", buildScript: "typecheck", copy: ["src"] });
  await writeIfChanged(join(root, "Dockerfile"), recipe);
  await writeIfChanged(join(root, ".dockerignore"), dockerignore());
  const after = await snapshot(root);
  return [...after.keys()].filter((f) => before.get(f) !== after.get(f)).sort();
}

async function applyAll(
  objects: KubeObject[],
  kubeconfig: string | undefined,
  dryRun: boolean,
): Promise<void> {
  const client = await KubeClient.load({ kubeconfig, fieldManager: "opkit-cli" });
  try {
    for (const obj of objects) {
      await client.apply(obj, { force: true, dryRun });
      console.log(
        `${obj.kind?.toLowerCase()}/${obj.metadata.name} ${dryRun ? "valid (server dry-run)" : "applied"}`,
      );
    }
  } finally {
    await client.close();
  }
}

export function generateCommands(): Command[] {
  const generate = new Command("generate")
    .description(
      "write CRDs, RBAC, manifests (config/), a Helm chart (chart/) and a Dockerfile from src/operator.ts",
    )
    .argument("[dir]", "project directory", ".")
    .option("--image <image>", "image for the Deployment (default: the operator's image or <name>:latest)")
    .action(async (dir: string, o: { image?: string }) => {
      const written = await generateProject(dir, o);
      console.log(
        written.length ? written.map((f) => `wrote ${f}`).join("\n") : "up to date: nothing changed",
      );
    });

  const deploy = new Command("deploy")
    .description("apply the project's CRDs, RBAC and Deployment to the current cluster")
    .argument("[dir]", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .option("--image <image>", "image for the Deployment")
    .option("--dry-run", "validate every object with a server-side dry run; change nothing")
    .action(async (dir: string, o: { kubeconfig?: string; image?: string; dryRun?: boolean }) => {
      const objects = await projectObjects(await loadOperator(dir), o);
      if (o.dryRun) {
        // Namespaced objects can only be dry-run in an existing namespace: create it for real first.
        const ns = objects.filter((x) => x.kind === "Namespace");
        await applyAll(ns, o.kubeconfig, false);
        await applyAll(
          objects.filter((x) => x.kind !== "Namespace"),
          o.kubeconfig,
          true,
        );
      } else await applyAll(objects, o.kubeconfig, false);
    });

  const undeploy = new Command("undeploy")
    .description("delete everything `opkit deploy` applied")
    .argument("[dir]", "project directory", ".")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .action(async (dir: string, o: { kubeconfig?: string }) => {
      const objects = await projectObjects(await loadOperator(dir));
      const client = await KubeClient.load({ kubeconfig: o.kubeconfig, fieldManager: "opkit-cli" });
      try {
        for (const obj of objects.reverse()) {
          try {
            await client.delete(
              { apiVersion: obj.apiVersion ?? "v1", kind: obj.kind ?? "" },
              obj.metadata.name ?? "",
              {
                namespace: obj.metadata.namespace,
                propagationPolicy: "Foreground",
              },
            );
            console.log(`${obj.kind?.toLowerCase()}/${obj.metadata.name} deleted`);
          } catch (err) {
            if (!(err instanceof NotFoundError)) throw err;
          }
        }
      } finally {
        await client.close();
      }
    });

  return [generate, deploy, undeploy];
}
