/**
 * How a new project depends on opkit. When the registry the project uses serves the very packages this
 * CLI runs from (same version and tarball integrity — a package called `opkit` that is something else does
 * not count), the project depends on a version range (`^0.1.0`): that is what `npm create opkit` gives.
 * Otherwise (a checkout not published, an offline machine) `opkit init` packs the two packages (`npm
 * pack`, cached by content) and vendors the tarballs into the project (`"opkit":
 * "file:vendor/opkit-<version>.tgz"`): the project then installs anywhere, also inside a container build.
 * `--link` keeps file: links to a checkout, for opkit's own development.
 */
import { execFile } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { copyFile, mkdir, mkdtemp, readFile, readdir, rename, rm, stat, writeFile } from "node:fs/promises";
import { basename, dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { cacheDir } from "opkit/testenv";

/** The packages a project is wired to, or packing them, went wrong; the message says what to do. */
export class PackagingError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "PackagingError";
  }
}

/** One of the two packages a project depends on, as found on this machine. */
export interface LocalPackage {
  name: string;
  version: string;
  /** Its directory: a checkout's packages/<x>, or an installed copy under node_modules. */
  dir: string;
}

/** A packed package, as `npm pack` wrote it. */
export interface PackedPackage {
  /** npm's file name, e.g. opkit-0.1.0.tgz or opkit-cli-0.1.0.tgz. */
  filename: string;
  /** The cached tarball. */
  path: string;
  /** Subresource integrity (sha512) of the tarball, as npm records it. */
  integrity: string;
}

/** The name and version of the package in `dir` (its package.json). */
export async function readPackage(dir: string): Promise<LocalPackage> {
  const pkg = JSON.parse(await readFile(join(dir, "package.json"), "utf8")) as {
    name?: string;
    version?: string;
  };
  if (!pkg.name || !pkg.version) throw new PackagingError(`${dir}/package.json has no name or version`);
  return { name: pkg.name, version: pkg.version, dir };
}

/** The opkit library and CLI packages this CLI runs from (a checkout, or an installed copy). */
export async function localPackages(): Promise<{ opkit: LocalPackage; cli: LocalPackage }> {
  // src/scaffold/ or dist/scaffold/: the package root is two levels up either way.
  const cliDir = fileURLToPath(new URL("../../", import.meta.url));
  const opkitDir = dirname(fileURLToPath(import.meta.resolve("opkit/package.json")));
  return { opkit: await readPackage(opkitDir), cli: await readPackage(resolve(cliDir)) };
}

/** The checkout (repository root) this CLI runs from, if it runs from one rather than an install. */
export function checkoutOf(pkgs: { opkit: LocalPackage; cli: LocalPackage }): string | undefined {
  const root = resolve(pkgs.cli.dir, "..", "..");
  const isCheckout =
    !pkgs.cli.dir.split(/[\\/]/).includes("node_modules") &&
    resolve(pkgs.opkit.dir) === join(root, "packages", "opkit") &&
    existsSync(join(root, "packages", "opkit", "tsconfig.json"));
  return isCheckout ? root : undefined;
}

async function walk(dir: string, out: string[]): Promise<void> {
  for (const e of await readdir(dir, { withFileTypes: true }).catch(() => [])) {
    if (e.name === "node_modules") continue;
    const p = join(dir, e.name);
    if (e.isDirectory()) await walk(p, out);
    else if (e.isFile()) out.push(p);
  }
}

/**
 * In a checkout, refuse to pack a package whose dist/ does not match src/: a tarball with stale
 * JavaScript would install without error and behave like an older opkit. (Installed copies ship
 * dist/ built, and have no tsconfig.json.)
 */
export async function assertBuilt(pkg: LocalPackage): Promise<void> {
  if (!existsSync(join(pkg.dir, "tsconfig.json"))) return;
  const rebuild = `build it first: make build (or npx tsc -b packages/opkit packages/cli)`;
  const stamp = await stat(join(pkg.dir, "tsconfig.tsbuildinfo")).catch(() => undefined);
  if (!stamp || !existsSync(join(pkg.dir, "dist")))
    throw new PackagingError(`${pkg.name} at ${pkg.dir} is not built: ${rebuild}`);
  const sources: string[] = [];
  await walk(join(pkg.dir, "src"), sources);
  for (const s of sources) {
    if ((await stat(s)).mtimeMs > stamp.mtimeMs)
      throw new PackagingError(
        `${pkg.name}: ${relative(pkg.dir, s)} changed after the last build: ${rebuild}`,
      );
  }
  const outputs: string[] = [];
  await walk(join(pkg.dir, "dist"), outputs);
  const have = new Set(sources.map((s) => relative(join(pkg.dir, "src"), s).replace(/\.ts$/, "")));
  for (const o of outputs.filter((f) => f.endsWith(".js"))) {
    if (!have.has(relative(join(pkg.dir, "dist"), o).replace(/\.js$/, "")))
      throw new PackagingError(
        `${pkg.name}: ${relative(pkg.dir, o)} has no source any more and would be packed: rm -rf ${join(pkg.dir, "dist")} ${join(pkg.dir, "tsconfig.tsbuildinfo")} and build again`,
      );
  }
}

/** Files every tarball carries: the package's own, else the repository root's (one copy in a checkout). */
export const LEGAL_FILES = ["LICENSE", "NOTICE"] as const;

/** The legal files a package takes from the checkout root because it has none of its own. */
function inheritedLegalFiles(pkg: LocalPackage): string[] {
  const root = resolve(pkg.dir, "..", "..");
  if (pkg.dir.split(/[\\/]/).includes("node_modules")) return [];
  return LEGAL_FILES.filter((f) => !existsSync(join(pkg.dir, f)) && existsSync(join(root, f))).map((f) =>
    join(root, f),
  );
}

/** A key that changes whenever anything npm would pack changes (paths, sizes, modification times). */
async function contentKey(pkg: LocalPackage): Promise<string> {
  const manifest = await readFile(join(pkg.dir, "package.json"), "utf8");
  const roots = ((JSON.parse(manifest) as { files?: string[] }).files ?? ["."]).filter(
    (f) => !f.startsWith("!"),
  );
  const files: string[] = [];
  for (const r of roots) {
    const p = join(pkg.dir, r);
    const st = await stat(p).catch(() => undefined);
    if (st?.isDirectory()) await walk(p, files);
    else if (st) files.push(p);
  }
  for (const f of await readdir(pkg.dir))
    if (/^(readme|license|notice|changelog)/i.test(f)) files.push(join(pkg.dir, f));
  files.push(...inheritedLegalFiles(pkg));
  const hash = createHash("sha256").update(manifest);
  for (const f of files.sort()) {
    const st = await stat(f);
    hash.update(`\0${relative(pkg.dir, f)}\0${st.size}\0${st.mtimeMs}`);
  }
  return hash.digest("hex").slice(0, 16);
}

function run(
  cmd: string,
  args: string[],
  cwd: string,
  timeout: number,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((done) => {
    execFile(
      cmd,
      args,
      { cwd, timeout, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : -1) : 0;
        done({ code, stdout, stderr: stderr || (err && code === -1 ? err.message : "") });
      },
    );
  });
}

/** sha512 subresource integrity of a file, as npm writes it into lockfiles. */
export async function integrityOf(file: string): Promise<string> {
  return `sha512-${createHash("sha512")
    .update(await readFile(file))
    .digest("base64")}`;
}

/**
 * `npm pack` a package into `$OPKIT_CACHE_DIR/packs`, reusing the tarball while its files are unchanged,
 * so repeated `opkit init`s (tests make many) pack once.
 */
export async function packPackage(pkg: LocalPackage): Promise<PackedPackage> {
  await assertBuilt(pkg);
  const packs = join(cacheDir(), "packs");
  await mkdir(packs, { recursive: true });
  const filename = `${pkg.name.replace(/^@/, "").replace("/", "-")}-${pkg.version}.tgz`;
  const cached = join(packs, `${filename.slice(0, -".tgz".length)}-${await contentKey(pkg)}.tgz`);
  if (existsSync(cached)) return { filename, path: cached, integrity: await integrityOf(cached) };

  const tmp = await mkdtemp(join(packs, ".pack-"));
  try {
    // npm decides what a package contains (files, negations, README…); it is packed from a staging
    // copy whose package.json is the published one (see publishedManifest).
    const listed = await npmPack(pkg.dir, ["--dry-run"], tmp);
    if (listed.filename !== filename)
      throw new PackagingError(`npm pack ${pkg.dir} would write ${listed.filename}, expected ${filename}`);
    const staging = join(tmp, "package");
    for (const f of listed.files) {
      await mkdir(dirname(join(staging, f)), { recursive: true });
      await copyFile(join(pkg.dir, f), join(staging, f));
    }
    for (const f of inheritedLegalFiles(pkg)) await copyFile(f, join(staging, basename(f)));
    const manifest = JSON.parse(await readFile(join(pkg.dir, "package.json"), "utf8")) as Record<
      string,
      unknown
    >;
    await writeFile(
      join(staging, "package.json"),
      `${JSON.stringify(publishedManifest(manifest), null, 2)}\n`,
    );
    await npmPack(staging, ["--pack-destination", tmp], tmp);
    // Rename is atomic: a concurrent init sees no tarball or a complete one.
    await rename(join(tmp, filename), cached);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
  await pruneOldPacks(packs, filename, cached);
  return { filename, path: cached, integrity: await integrityOf(cached) };
}

async function npmPack(
  dir: string,
  extra: string[],
  cwd: string,
): Promise<{ filename: string; files: string[] }> {
  const r = await run("npm", ["pack", dir, "--json", ...extra], cwd, 300_000);
  if (r.code !== 0)
    throw new PackagingError(`npm pack ${dir} failed (exit ${r.code}):\n${r.stderr.slice(-2000)}`);
  const [info] = JSON.parse(r.stdout.slice(r.stdout.indexOf("["))) as {
    filename: string;
    files: { path: string }[];
  }[];
  if (!info) throw new PackagingError(`npm pack ${dir} printed no result`);
  return { filename: info.filename, files: info.files.map((f) => f.path) };
}

/**
 * The package.json a tarball carries: without the `opkit-source` export condition, which points at
 * src/*.ts for this repository's own tests. Under node_modules Node refuses to strip types, so a
 * consumer that happened to run with that condition would fail to import opkit at all.
 */
export function publishedManifest(manifest: Record<string, unknown>): Record<string, unknown> {
  const strip = (node: unknown): unknown => {
    if (Array.isArray(node)) return node.map(strip);
    if (node === null || typeof node !== "object") return node;
    return Object.fromEntries(
      Object.entries(node as Record<string, unknown>)
        .filter(([k]) => k !== "opkit-source")
        .map(([k, v]) => [k, strip(v)]),
    );
  };
  return manifest.exports === undefined ? manifest : { ...manifest, exports: strip(manifest.exports) };
}

/** Drop earlier packs of the same package a day after they were made (another checkout may still use one). */
async function pruneOldPacks(packs: string, filename: string, keep: string): Promise<void> {
  const prefix = filename.slice(0, -".tgz".length).replace(/-\d+\.\d+\.\d+.*$/, "");
  for (const f of await readdir(packs)) {
    const p = join(packs, f);
    if (p === keep || !f.startsWith(`${prefix}-`) || !f.endsWith(".tgz")) continue;
    const st = await stat(p).catch(() => undefined);
    if (st && Date.now() - st.mtimeMs > 24 * 3600_000) await rm(p, { force: true });
  }
}

/**
 * Pack both packages (as `opkit init` vendors them) into `outDir`: to vendor opkit into a project
 * made otherwise, or to publish exactly the tarballs whose integrity `opkit init` compares against.
 */
export async function packInto(outDir: string): Promise<{ path: string; integrity: string }[]> {
  const pkgs = await localPackages();
  await mkdir(outDir, { recursive: true });
  const out: { path: string; integrity: string }[] = [];
  for (const pkg of [pkgs.opkit, pkgs.cli]) {
    const packed = await packPackage(pkg);
    const target = join(resolve(outDir), packed.filename);
    await copyFile(packed.path, target);
    out.push({ path: target, integrity: packed.integrity });
  }
  return out;
}

/** What the registry a project uses says about one package version. */
export type RegistryAnswer =
  | { state: "same" }
  | { state: "absent" }
  | { state: "different"; integrity: string }
  | { state: "unreachable"; error: string };

/** Asks the registry (as `npm view` in `cwd`, so the project's .npmrc applies) whether it serves `pkg`. */
export type RegistryLookup = (
  name: string,
  version: string,
  cwd: string,
) => Promise<{ integrity?: string; error?: string; absent?: boolean }>;

/** `npm view <name>@<version> dist.integrity`. */
export const npmView: RegistryLookup = async (name, version, cwd) => {
  const r = await run("npm", ["view", `${name}@${version}`, "dist.integrity", "--json"], cwd, 30_000);
  if (r.code === 0) {
    const out = r.stdout.trim();
    // npm prints nothing (exit 0) when the package exists but not this version.
    if (!out) return { absent: true };
    return { integrity: JSON.parse(out) as string };
  }
  if (/E404|404 Not Found/.test(r.stderr)) return { absent: true };
  return { error: r.stderr.trim().split("\n").slice(-3).join(" ") || `npm view exited ${r.code}` };
};

/** Compare a registry's package with the local build: only the very same tarball counts as "same". */
export async function registryAnswer(
  lookup: RegistryLookup,
  pkg: LocalPackage,
  integrity: string,
  cwd: string,
): Promise<RegistryAnswer> {
  const r = await lookup(pkg.name, pkg.version, cwd);
  if (r.error) return { state: "unreachable", error: r.error };
  if (r.absent || !r.integrity) return { state: "absent" };
  return r.integrity === integrity ? { state: "same" } : { state: "different", integrity: r.integrity };
}

/**
 * The integrity of the tarball an installed copy was installed from, as npm recorded it in the hidden
 * lockfile next to it (`node_modules/.package-lock.json`, also written for `npm exec`/`npm create`
 * installs). Undefined for a checkout, or when npm left no record.
 */
export async function installedIntegrity(pkg: LocalPackage): Promise<string | undefined> {
  const parts = resolve(pkg.dir).split(/[\\/]/);
  const at = parts.indexOf("node_modules");
  if (at < 0) return undefined;
  const prefix = parts.slice(0, at).join("/");
  const lock = await readFile(join(prefix, "node_modules", ".package-lock.json"), "utf8").catch(() => "");
  if (!lock) return undefined;
  const entries = (
    JSON.parse(lock) as { packages?: Record<string, { version?: string; integrity?: string }> }
  ).packages;
  const entry = entries?.[parts.slice(at).join("/")];
  return entry?.version === pkg.version ? entry.integrity : undefined;
}

/** How `opkit init` wires opkit in: the registry when it has these packages, else vendor; or --link. */
export interface DependencyChoice {
  /** npm specs for package.json: opkit (dependency) and @opkit/cli (devDependency). */
  opkit: string;
  cli: string;
  /** What was decided and why, for the user. */
  notes: string[];
}

export interface ChooseOptions {
  /** Link a checkout (`file:` directories) instead; `true` = the checkout this CLI runs from. */
  link?: string | true;
  /** Vendor without asking the registry. */
  vendor?: boolean;
  /** Replaces `npm view` (tests). */
  lookup?: RegistryLookup;
}

/** Decide the specs and, when vendoring, copy the tarballs into `<root>/vendor/`. */
export async function wireDependencies(root: string, opts: ChooseOptions = {}): Promise<DependencyChoice> {
  const pkgs = await localPackages();
  if (opts.link !== undefined) {
    const checkout = opts.link === true ? checkoutOf(pkgs) : resolve(opts.link);
    if (!checkout)
      throw new PackagingError(
        `--link: this opkit (${pkgs.cli.dir}) is not a checkout; pass the path of one: --link /path/to/opkit`,
      );
    const lib = join(checkout, "packages", "opkit");
    const cli = join(checkout, "packages", "cli");
    for (const d of [lib, cli])
      if (!existsSync(join(d, "package.json")))
        throw new PackagingError(
          `--link ${checkout}: ${d}/package.json is missing; pass the root of an opkit checkout`,
        );
    return {
      opkit: `file:${lib}`,
      cli: `file:${cli}`,
      notes: [`linked to the checkout ${checkout} (file: links)`],
    };
  }

  // An installed CLI (e.g. run by `npm create opkit`) compares what it was installed from; a checkout
  // compares the tarballs it packs.
  const installed = { opkit: await installedIntegrity(pkgs.opkit), cli: await installedIntegrity(pkgs.cli) };
  const packs: Partial<Record<"opkit" | "cli", PackedPackage>> = {};
  const pack = async (key: "opkit" | "cli"): Promise<PackedPackage> =>
    (packs[key] ??= await packPackage(pkgs[key]));
  const integrity = async (key: "opkit" | "cli"): Promise<string> =>
    installed[key] ?? (await pack(key)).integrity;
  const notes: string[] = [];
  if (!opts.vendor) {
    const lookup = opts.lookup ?? npmView;
    const answers = {
      opkit: await registryAnswer(lookup, pkgs.opkit, await integrity("opkit"), root),
      cli: await registryAnswer(lookup, pkgs.cli, await integrity("cli"), root),
    };
    if (answers.opkit.state === "same" && answers.cli.state === "same") {
      return {
        opkit: `^${pkgs.opkit.version}`,
        cli: `^${pkgs.cli.version}`,
        notes: [
          `the registry has ${pkgs.opkit.name}@${pkgs.opkit.version} and ${pkgs.cli.name}@${pkgs.cli.version}: depending on ^${pkgs.opkit.version}`,
        ],
      };
    }
    for (const key of ["opkit", "cli"] as const) {
      const a = answers[key];
      const id = `${pkgs[key].name}@${pkgs[key].version}`;
      if (a.state === "absent") notes.push(`the registry has no ${id}`);
      else if (a.state === "different")
        notes.push(
          `the registry's ${id} is not this build (its integrity ${a.integrity}, this build's ${await integrity(key)})`,
        );
      else if (a.state === "unreachable") notes.push(`could not ask the registry about ${id}: ${a.error}`);
    }
  }
  const packed = { opkit: await pack("opkit"), cli: await pack("cli") };
  await mkdir(join(root, "vendor"), { recursive: true });
  for (const p of [packed.opkit, packed.cli]) await copyFile(p.path, join(root, "vendor", p.filename));
  notes.push(`vendored ${packed.opkit.filename} and ${packed.cli.filename} into vendor/ (commit them)`);
  return {
    opkit: `file:vendor/${packed.opkit.filename}`,
    cli: `file:vendor/${packed.cli.filename}`,
    notes,
  };
}
