/**
 * `opkit migrate`: after a release changed a CRD's storage version, rewrite every stored object in it and
 * trim `status.storedVersions` (`migrateStorage`), so the old version can be dropped in the next release.
 * Progress is one line redrawn in a terminal, one line per page otherwise.
 */
import { Command } from "commander";
import { KubeClient, migrateStorage, type MigrationProgress, type MigrationResult } from "opkit";
import { crdName, type CustomResourceDefinition } from "opkit/generate";
import { projectObjects } from "./generate.ts";
import { loadOperator } from "./operator.ts";
import { UsageError } from "./project.ts";

/** Options of `migrateProject`. */
export interface MigrateProjectOptions {
  /** Only the CRD of this kind (its name, e.g. WebApp). */
  kind?: string;
  /** The cluster (default: the standard kubeconfig loading rules). */
  kubeconfig?: string;
  /** Writes per second at most. */
  qps?: number;
  /** "never" skips the in-tree StorageVersionMigration even where the cluster serves it. */
  inTree?: "auto" | "never";
  /** Told after every page. */
  onProgress?: (p: MigrationProgress) => void;
}

/** Migrates the stored objects of the project's CRDs (or of one kind's); returns one result per CRD. */
export async function migrateProject(
  dir: string,
  opts: MigrateProjectOptions = {},
): Promise<MigrationResult[]> {
  const op = await loadOperator(dir);
  const crds = (await projectObjects(op, { dir })).filter(
    (o): o is CustomResourceDefinition => o.kind === "CustomResourceDefinition",
  );
  const chosen = opts.kind ? crds.filter((c) => c.spec.names.kind === opts.kind) : crds;
  if (chosen.length === 0)
    throw new UsageError(
      opts.kind
        ? `--kind ${opts.kind}: the project defines no such kind (it defines ${crds.map((c) => c.spec.names.kind).join(", ") || "none"})`
        : "the project defines no custom kinds: nothing to migrate",
    );
  const client = await KubeClient.load({ kubeconfig: opts.kubeconfig, fieldManager: "opkit-migrate" });
  try {
    const results: MigrationResult[] = [];
    for (const crd of chosen)
      results.push(
        await migrateStorage(client, crdName(crd), {
          qps: opts.qps,
          inTree: opts.inTree,
          onProgress: opts.onProgress,
        }),
      );
    return results;
  } finally {
    await client.close();
  }
}

function progressLine(p: MigrationProgress): string {
  const rate = p.elapsedMs > 0 ? (p.migrated / (p.elapsedMs / 1000)).toFixed(0) : "0";
  return `${p.crd} (${p.method}): ${p.migrated} rewritten, ${p.conflicts} rewritten by others, ${p.gone} gone, ${rate}/s`;
}

function parseQps(v: string): number {
  const n = Number(v);
  if (!Number.isFinite(n) || n <= 0)
    throw new UsageError(`--qps ${v}: give a positive number of writes per second`);
  return n;
}

/** `opkit migrate`. */
export function migrateCommand(): Command {
  return new Command("migrate")
    .description(
      "rewrite every stored object of the project's CRDs in their storage version, then trim status.storedVersions",
    )
    .option("--dir <dir>", "project directory", ".")
    .option("--kind <kind>", "only this kind's CRD (e.g. WebApp)")
    .option("--kubeconfig <path>", "kubeconfig (default: standard loading rules)")
    .option("--qps <n>", "writes per second at most (default 50)", parseQps)
    .option("--no-in-tree", "do not use the cluster's StorageVersionMigration even where it is served")
    .action(async (o: { dir: string; kind?: string; kubeconfig?: string; qps?: number; inTree: boolean }) => {
      const tty = process.stdout.isTTY;
      const { createLogUpdate } = await import("log-update");
      const draw = tty ? createLogUpdate(process.stdout) : undefined;
      const results = await migrateProject(o.dir, {
        kind: o.kind,
        kubeconfig: o.kubeconfig,
        qps: o.qps,
        inTree: o.inTree ? "auto" : "never",
        onProgress: (p) => (draw ? draw(progressLine(p)) : console.log(progressLine(p))),
      });
      draw?.done();
      for (const r of results) {
        console.log(
          r.needed
            ? `${r.crd}: every object stored in ${r.storageVersion} (${r.migrated} rewritten in ${(r.elapsedMs / 1000).toFixed(1)} s, ${r.rate.toFixed(0)}/s); storedVersions ${r.storedVersionsBefore.join(",")} → ${r.storageVersion}`
            : `${r.crd}: already stored in ${r.storageVersion} alone; nothing to do`,
        );
      }
    });
}
