/**
 * `opkit env prune`: each Kubernetes release takes about 0.5 GB of binaries, so the cached builds of
 * releases no env uses are removed, as are builds of an older recipe. Kept: every build an env on this
 * machine runs (found from the binaries recorded in its state), the default release unless `all`, a build
 * another process is writing now, and the shared etcd and kwok builds while a kept release links to them.
 * Go's own module and build caches are not touched.
 */
import { existsSync } from "node:fs";
import { lstat, readFile, readdir, rm } from "node:fs/promises";
import { join, sep } from "node:path";
import { EnvFiles } from "./state.ts";
import { KUBERNETES_VERSION, buildsDir, releaseDir, sharedBuildDir } from "./versions.ts";

/** The file a build in progress holds in its directory: the building process's PID. */
export const BUILDING_FILE = "building.pid";

/** Options of `pruneBuilds`. */
export interface PruneOptions {
  /** Remove the default release's build too when no env uses it. */
  all?: boolean;
  /** Only say what would be removed. */
  dryRun?: boolean;
}

/** One cached build and what prune did with it. */
export interface PrunedBuild {
  /** Its directory. */
  path: string;
  /** Bytes on disk (a binary linked from several builds counts in each). */
  bytes: number;
  /** Why it was kept, or "removed" (or "would be removed" on a dry run). */
  reason: string;
}

/** What `pruneBuilds` found: the builds removed and the ones kept, with why. */
export interface PruneResult {
  /** Builds removed (or that would be, on a dry run). */
  removed: PrunedBuild[];
  /** Builds kept, each with its reason. */
  kept: PrunedBuild[];
}

async function sizeOf(path: string): Promise<number> {
  const st = await lstat(path).catch(() => undefined);
  if (!st) return 0;
  if (!st.isDirectory()) return st.size;
  let total = 0;
  for (const e of await readdir(path)) total += await sizeOf(join(path, e));
  return total;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
}

async function buildingNow(dir: string): Promise<boolean> {
  const f = join(dir, BUILDING_FILE);
  if (!existsSync(f)) return false;
  const pid = Number((await readFile(f, "utf8").catch(() => "")).trim());
  return Number.isInteger(pid) && pid > 0 && alive(pid);
}

/** Remove the cached builds no env uses (see the module's doc for what is kept). */
export async function pruneBuilds(opts: PruneOptions = {}): Promise<PruneResult> {
  const root = buildsDir();
  const entries = existsSync(root) ? await readdir(root) : [];
  const used = new Map<string, string>();
  for (const name of await EnvFiles.list()) {
    const s = await new EnvFiles(name).read();
    if (!s) continue;
    const exes = Object.values(s.components).map((c) => c.exe);
    for (const e of entries) {
      const dir = join(root, e);
      // An env that recorded no process yet (starting now) will run its release's current build.
      const runs =
        exes.length > 0 ? exes.some((x) => x.startsWith(dir + sep)) : dir === releaseDir(s.kubernetesVersion);
      if (runs) used.set(dir, `env "${name}" runs it`);
    }
  }
  const removed: PrunedBuild[] = [];
  const kept: PrunedBuild[] = [];
  const shared = new Set([sharedBuildDir("etcd"), sharedBuildDir("kwok")]);
  const keepReason = async (dir: string): Promise<string | undefined> => {
    if (used.has(dir)) return used.get(dir);
    if (await buildingNow(dir)) return "a build is writing it now";
    if (!opts.all && dir === releaseDir(KUBERNETES_VERSION))
      return `the default release (${KUBERNETES_VERSION})`;
    return undefined;
  };
  // Releases first: the shared builds are kept while any kept release links to them.
  const releases = entries.map((e) => join(root, e)).filter((d) => !shared.has(d));
  for (const dir of releases) {
    const reason = await keepReason(dir);
    const bytes = await sizeOf(dir);
    if (reason) kept.push({ path: dir, bytes, reason });
    else removed.push({ path: dir, bytes, reason: opts.dryRun ? "would be removed" : "removed" });
  }
  const keptReleases = kept.filter((k) => /\/k8s-v[^/]*$/.test(k.path));
  for (const dir of [...shared].filter((d) => entries.includes(d.slice(root.length + 1)))) {
    const reason =
      (await keepReason(dir)) ?? (keptReleases.length > 0 ? "kept releases link to it" : undefined);
    const bytes = await sizeOf(dir);
    if (reason) kept.push({ path: dir, bytes, reason });
    else removed.push({ path: dir, bytes, reason: opts.dryRun ? "would be removed" : "removed" });
  }
  if (!opts.dryRun) for (const r of removed) await rm(r.path, { recursive: true, force: true });
  return { removed, kept };
}
