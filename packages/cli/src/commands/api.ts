/**
 * `opkit api freeze` and `opkit api check`: the released API of a project. `freeze` writes the CRDs the
 * project generates now under `config/crds/released/` (commit them with a release); `check` compares
 * what the project generates now with that snapshot and fails on every change that breaks existing
 * clients or stored objects (`checkCompatibility`). `opkit generate --check` runs the same check.
 *
 * Intended breaks are recorded with their reason in `config/crds/released/breaking-changes.yaml`, so the
 * check never teaches anyone to delete the snapshot.
 */
import { Command } from "commander";
import { existsSync } from "node:fs";
import { mkdir, readdir, readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { parse } from "yaml";
import { CustomResourceDefinitions, KubeClient } from "opkit";
import {
  checkCompatibility,
  crdName,
  crdsFromYaml,
  formatFinding,
  toYaml,
  type AllowedBreak,
  type CompatReport,
  type CustomResourceDefinition,
} from "opkit/generate";
import { projectObjects, writeIfChanged } from "./generate.ts";
import { loadOperator } from "./operator.ts";

/** Where the released snapshot lives, relative to the project. */
export const RELEASED_DIR = join("config", "crds", "released");
/** The first lines of every snapshot file. */
const RELEASED_HEADER =
  "# The API as released, written by `opkit api freeze`: `opkit generate --check` compares the project with it.\n";
/** The file of intended breaks, in the snapshot's folder. */
export const BREAKING_CHANGES_FILE = "breaking-changes.yaml";

/** The current CRDs break the released ones; the message lists every finding with its path. */
export class ApiCompatibilityError extends Error {
  /** The findings no recorded break covers. */
  readonly report: CompatReport;
  constructor(report: CompatReport) {
    super(
      `the API breaks what was released (${RELEASED_DIR}):\n${report.breaking.map((f) => `  ${formatFinding(f)}`).join("\n")}\n` +
        `Change the kind so the break goes away, or, when the break is intended, record it with its reason in ` +
        `${join(RELEASED_DIR, BREAKING_CHANGES_FILE)} (- crd: <name>\\n  rule: <rule>\\n  path: <path>\\n  reason: <why>).`,
    );
    this.name = "ApiCompatibilityError";
    this.report = report;
  }
}

/** The CRDs the project's definition generates now. */
async function currentCrds(project: string): Promise<CustomResourceDefinition[]> {
  const op = await loadOperator(project);
  return (await projectObjects(op, { dir: project })).filter(
    (o): o is CustomResourceDefinition => o.kind === "CustomResourceDefinition",
  );
}

/** Writes the CRDs the project generates now as the released snapshot; returns the files written. */
export async function freezeApi(dir: string): Promise<string[]> {
  const project = resolve(dir);
  const out = join(project, RELEASED_DIR);
  const crds = await currentCrds(project);
  if (crds.length) await mkdir(out, { recursive: true });
  const written: string[] = [];
  for (const crd of crds) {
    const file = join(out, `${crdName(crd)}.yaml`);
    await writeIfChanged(file, RELEASED_HEADER + toYaml(crd));
    written.push(join(RELEASED_DIR, `${crdName(crd)}.yaml`));
  }
  return written;
}

/** The released CRDs and the recorded intended breaks; undefined when nothing was frozen yet. */
async function released(
  project: string,
): Promise<{ crds: CustomResourceDefinition[]; allowed: AllowedBreak[] } | undefined> {
  const dir = join(project, RELEASED_DIR);
  if (!existsSync(dir)) return undefined;
  const crds: CustomResourceDefinition[] = [];
  let allowed: AllowedBreak[] = [];
  for (const file of (await readdir(dir)).sort()) {
    const text = await readFile(join(dir, file), "utf8");
    if (file === BREAKING_CHANGES_FILE) allowed = (parse(text) as AllowedBreak[] | null) ?? [];
    else if (file.endsWith(".yaml")) crds.push(...crdsFromYaml(text));
  }
  return { crds, allowed };
}

/** Options of `checkApi`. */
export interface CheckApiOptions {
  /** The oldest Kubernetes minor the operator supports, for the ratcheting notes. */
  minKubernetesVersion?: string;
  /** Read each CRD's `status.storedVersions` from this cluster (a kubeconfig path). */
  kubeconfig?: string;
}

/**
 * Compares what the project generates now with its released snapshot. Undefined when the project has no
 * snapshot yet (nothing was released).
 */
export async function checkApi(dir: string, opts: CheckApiOptions = {}): Promise<CompatReport | undefined> {
  const project = resolve(dir);
  const snapshot = await released(project);
  if (!snapshot) return undefined;
  const current = await currentCrds(project);
  const storedVersions = opts.kubeconfig
    ? await clusterStoredVersions(opts.kubeconfig, snapshot.crds)
    : undefined;
  return checkCompatibility(snapshot.crds, current, {
    allowed: snapshot.allowed,
    minKubernetesVersion: opts.minKubernetesVersion,
    storedVersions,
  });
}

async function clusterStoredVersions(
  kubeconfig: string,
  crds: readonly CustomResourceDefinition[],
): Promise<Record<string, string[]>> {
  const client = await KubeClient.load({ kubeconfig });
  try {
    const out: Record<string, string[]> = {};
    for (const crd of crds) {
      const live = await client.getOptional(CustomResourceDefinitions, crdName(crd));
      if (live?.status?.storedVersions) out[crdName(crd)] = live.status.storedVersions;
    }
    return out;
  } finally {
    await client.close();
  }
}

/** Prints a report's findings; throws ApiCompatibilityError when any is not an intended break. */
export function reportApiCheck(
  report: CompatReport | undefined,
  log: (line: string) => void = console.log,
): void {
  if (!report) {
    log(`no released API to compare with (${RELEASED_DIR}): run \`opkit api freeze\` when you release`);
    return;
  }
  for (const f of report.findings) if (f.allowedBecause !== undefined) log(`intended: ${formatFinding(f)}`);
  if (report.breaking.length) throw new ApiCompatibilityError(report);
  log(`the API is compatible with the released one (${RELEASED_DIR})`);
}

/** `opkit api freeze|check`. */
export function apiCommand(): Command {
  const api = new Command("api").description(
    "the project's released API: freeze it with a release, check changes against it",
  );
  api
    .command("freeze")
    .description(
      `write the CRDs the project generates now as the released API (${RELEASED_DIR}); commit them with the release`,
    )
    .option("--dir <dir>", "project directory", ".")
    .action(async (o: { dir: string }) => {
      for (const f of await freezeApi(o.dir)) console.log(`froze ${f}`);
    });
  api
    .command("check")
    .description(
      "fail on every change since the released API that breaks clients or stored objects, naming the version and field",
    )
    .option("--dir <dir>", "project directory", ".")
    .option(
      "--min-kubernetes-version <minor>",
      "the oldest Kubernetes the operator supports, e.g. 1.33 (notes where validation ratcheting protects stored objects)",
    )
    .option(
      "--kubeconfig <path>",
      "read each CRD's status.storedVersions from this cluster instead of assuming the released storage versions",
    )
    .action(async (o: { dir: string; minKubernetesVersion?: string; kubeconfig?: string }) => {
      reportApiCheck(await checkApi(o.dir, o));
    });
  return api;
}
