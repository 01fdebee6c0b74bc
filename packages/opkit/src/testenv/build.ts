/**
 * Builds the control plane from the official Go modules with the machine's own Go toolchain.
 *
 * k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging module with a local
 * path. A wrapper module of ours requires the release and replaces each staging module with its
 * published v0.X.Y tag (read from the release's own go.mod, never typed by hand). etcd and kwok get a
 * wrapper each, built once and linked into every release: forcing etcd's server into a Kubernetes
 * module graph would move that release's own etcd client (1.34 is tested with 3.6.4, 1.37 with 3.7.0).
 */
import { spawn } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { copyFile, link, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { BUILDING_FILE } from "./prune.ts";
import {
  BUILD_DATE,
  COMPONENT_BINARIES,
  ETCD_VERSION,
  KWOK_VERSION,
  SUPPORTED_KUBERNETES_VERSIONS,
  binDir,
  releaseDir,
  resolveKubernetesVersion,
  sharedBuildDir,
  type BinaryName,
} from "./versions.ts";

/**
 * Go is not installed: the control plane is built from the official Go modules, so `opkit env build` needs
 * it; the message says how to fix it.
 */
export class GoNotFoundError extends Error {
  constructor() {
    super(
      "`go` is not on PATH: opkit builds etcd, kube-apiserver and kwok from the official Go modules. " +
        "Install Go 1.26 or later (or add it to PATH) and run again.",
    );
    this.name = "GoNotFoundError";
  }
}

/** Building one of the control-plane binaries failed; the message carries the end of the build log. */
export class BuildError extends Error {
  /** The full build log of the failed step. */
  readonly logFile: string;
  /** The last lines of that log. */
  readonly logTail: string;
  constructor(step: string, logFile: string, logTail: string) {
    super(`building ${step} failed; last lines of ${logFile}:\n${logTail}`);
    this.name = "BuildError";
    this.logFile = logFile;
    this.logTail = logTail;
  }
}

/**
 * A progress report of `buildControlPlane`, so a caller can show what the minutes-long first build is doing.
 */
export interface BuildProgress {
  /** The binary or step, e.g. "kube-apiserver". */
  step: string;
  /** Started, finished, or skipped because the binary is already in the cache. */
  state: "start" | "done" | "cached";
  /** Time spent on the step so far. */
  elapsedMs: number;
}

/** Options of `buildControlPlane`. */
export interface BuildOptions {
  /** The Kubernetes release to build: a minor ("1.34") or a full version; default as `resolveKubernetesVersion`. */
  kubernetesVersion?: string;
  /** Told about each step, e.g. to print progress. */
  onProgress?: (p: BuildProgress) => void;
  /** Rebuild even when the binaries exist. */
  force?: boolean;
}

/** What `buildControlPlane` did. */
export interface BuildResult {
  /** Where the binaries are. */
  binDir: string;
  /** The Kubernetes release built. */
  kubernetesVersion: string;
  /** The binaries built now (empty when everything was cached). */
  built: BinaryName[];
  /** Total time taken. */
  elapsedMs: number;
}

const K8S_PACKAGES: Record<Exclude<BinaryName, "kwok" | "etcd">, string> = {
  "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
  "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
  "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
  kubectl: "k8s.io/kubernetes/cmd/kubectl",
};

/** etcd and kwok: built once each, in a wrapper module of their own, and linked into every release. */
const SHARED_TOOLS = {
  etcd: { module: "go.etcd.io/etcd/server/v3", version: ETCD_VERSION, pkg: "go.etcd.io/etcd/server/v3" },
  kwok: { module: "sigs.k8s.io/kwok", version: KWOK_VERSION, pkg: "sigs.k8s.io/kwok/cmd/kwok" },
} as const;

/**
 * The control-plane binaries of a Kubernetes release (default: the one `resolveKubernetesVersion()` picks) not
 * built yet; empty means `env up` can start without a build.
 */
export function missingBinaries(version: string = resolveKubernetesVersion()): BinaryName[] {
  return COMPONENT_BINARIES.filter((b) => !existsSync(join(binDir(version), b)));
}

/**
 * Build every missing binary of a Kubernetes release (all of them with `force`). Safe to call when everything
 * is cached. etcd and kwok are built once for all releases and linked into each release's bin directory.
 */
export async function buildControlPlane(opts: BuildOptions = {}): Promise<BuildResult> {
  const version = resolveKubernetesVersion(opts.kubernetesVersion);
  const started = Date.now();
  const bin = binDir(version);
  const todo = opts.force ? [...COMPONENT_BINARIES] : missingBinaries(version);
  const progress = (step: string, state: BuildProgress["state"], since: number): void =>
    opts.onProgress?.({ step, state, elapsedMs: Date.now() - since });
  if (todo.length === 0) {
    progress("control plane", "cached", started);
    return { binDir: bin, kubernetesVersion: version, built: [], elapsedMs: 0 };
  }
  await checkGo();
  const root = releaseDir(version);
  const log = join(root, "build.log");
  await mkdir(bin, { recursive: true });
  await writeFile(log, `opkit control-plane build of Kubernetes ${version} ${new Date().toISOString()}\n`);
  // `opkit env prune` leaves a directory alone while the process named here is alive.
  const marks = [root, sharedBuildDir("etcd"), sharedBuildDir("kwok")];
  for (const d of marks) {
    await mkdir(d, { recursive: true });
    await writeFile(join(d, BUILDING_FILE), String(process.pid));
  }
  try {
    return await buildMissing(version, todo, opts, started, log);
  } finally {
    for (const d of marks) await rm(join(d, BUILDING_FILE), { force: true });
  }
}

async function buildMissing(
  version: string,
  todo: BinaryName[],
  opts: BuildOptions,
  started: number,
  log: string,
): Promise<BuildResult> {
  const root = releaseDir(version);
  const bin = binDir(version);
  const progress = (step: string, state: BuildProgress["state"], since: number): void =>
    opts.onProgress?.({ step, state, elapsedMs: Date.now() - since });

  for (const tool of ["etcd", "kwok"] as const) {
    if (!todo.includes(tool)) continue;
    const shared = join(sharedBuildDir(tool), "bin", tool);
    if (opts.force || !existsSync(shared)) {
      const t = Date.now();
      progress(tool, "start", t);
      await buildSharedTool(tool, log);
      progress(tool, "done", t);
    }
    await linkInto(shared, bin, tool);
  }

  const k8sTodo = todo.filter((b): b is keyof typeof K8S_PACKAGES => b in K8S_PACKAGES);
  if (k8sTodo.length > 0) {
    const dir = join(root, "src", "kubernetes");
    let t = Date.now();
    progress(`kubernetes ${version} module graph`, "start", t);
    await writeKubernetesWrapper(version, dir, log);
    progress(`kubernetes ${version} module graph`, "done", t);
    for (const b of k8sTodo) {
      t = Date.now();
      progress(b, "start", t);
      await rm(join(bin, `${b}.help`), { force: true }); // the flags and gates read from the old binary
      await goBuild(dir, K8S_PACKAGES[b], join(bin, b), `-s -w ${versionLdflags(version)}`, log);
      progress(b, "done", t);
    }
  }
  return { binDir: bin, kubernetesVersion: version, built: todo, elapsedMs: Date.now() - started };
}

/** Build etcd or kwok in a wrapper module that requires only it, so its library versions are its own. */
async function buildSharedTool(tool: keyof typeof SHARED_TOOLS, log: string): Promise<void> {
  const { module, version, pkg } = SHARED_TOOLS[tool];
  const root = sharedBuildDir(tool);
  const dir = join(root, "src");
  await mkdir(dir, { recursive: true });
  await mkdir(join(root, "bin"), { recursive: true });
  await writeFile(
    join(dir, "go.mod"),
    `// Generated by opkit: builds ${tool} from its published module.\nmodule opkit.dev/testenv/${tool}\n\ngo 1.26.0\n\nrequire ${module} ${version}\n`,
  );
  await writeFile(join(dir, "tools.go"), toolsFile([pkg]));
  await run("go", ["mod", "tidy"], dir, log, `${tool} module graph`);
  await goBuild(dir, pkg, join(root, "bin", tool), "-s -w", log);
}

/** A hard link of a shared binary into a release's bin directory (a copy where links are not possible). */
async function linkInto(shared: string, bin: string, name: string): Promise<void> {
  const tmp = join(bin, `.${name}.link`);
  await rm(tmp, { force: true });
  try {
    await link(shared, tmp);
  } catch {
    await copyFile(shared, tmp);
  }
  await rename(tmp, join(bin, name));
}

function versionLdflags(version: string): string {
  const [major, minor] = version.replace(/^v/, "").split(".");
  const v = "k8s.io/component-base/version";
  return [
    `-X ${v}.gitVersion=${version}`,
    `-X ${v}.gitMajor=${major}`,
    `-X ${v}.gitMinor=${minor}`,
    `-X ${v}.gitTreeState=clean`,
    `-X ${v}.buildDate=${BUILD_DATE}`,
  ].join(" ");
}

async function writeKubernetesWrapper(version: string, dir: string, log: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  // The release's own go.mod names every staging module and the go/godebug lines to copy.
  const dl = await run(
    "go",
    ["mod", "download", "-json", `k8s.io/kubernetes@${version}`],
    dir,
    log,
    `download k8s.io/kubernetes@${version}`,
  ).catch((err: unknown) => {
    throw err instanceof BuildError
      ? new BuildError(
          `download k8s.io/kubernetes@${version} (is ${version} a published release? the tested ones are ${SUPPORTED_KUBERNETES_VERSIONS.join(", ")})`,
          err.logFile,
          err.logTail,
        )
      : err;
  });
  const info = JSON.parse(dl) as { GoMod?: string; Error?: string };
  if (!info.GoMod) throw new BuildError("download k8s.io/kubernetes", log, info.Error ?? dl.slice(-2000));
  const upstream = await readFile(info.GoMod, "utf8");
  const goLine = /^go (\S+)$/m.exec(upstream)?.[1] ?? "1.26.0";
  const godebug = /^godebug (.+)$/m.exec(upstream)?.[0] ?? "";
  const stagingTag = version.replace(/^v1\./, "v0.");
  const staging = [...upstream.matchAll(/^\s*(k8s\.io\/[\w.-]+)\s*=>\s*\.\/staging\//gm)].map((m) => m[1]);
  if (staging.length === 0)
    throw new BuildError(
      "kubernetes wrapper",
      log,
      "no staging replace directives found in the release's go.mod",
    );
  const gomod = [
    "// Generated by opkit: builds the Kubernetes control plane from the published modules.",
    "module opkit.dev/testenv/kubernetes",
    "",
    `go ${goLine}`,
    "",
    godebug,
    "",
    `require k8s.io/kubernetes ${version}`,
    "",
    "replace (",
    ...staging.map((m) => `\t${m} => ${m} ${stagingTag}`),
    ")",
    "",
  ].join("\n");
  await writeFile(join(dir, "go.mod"), gomod);
  await rm(join(dir, "go.sum"), { force: true });
  await writeFile(join(dir, "tools.go"), toolsFile(Object.values(K8S_PACKAGES)));
  await run("go", ["mod", "tidy"], dir, log, "kubernetes module graph");
}

function toolsFile(imports: string[]): string {
  return `//go:build tools\n\n// Generated by opkit: keeps the built commands in the module graph.\npackage tools\n\nimport (\n${imports.map((i) => `\t_ "${i}"`).join("\n")}\n)\n`;
}

async function goBuild(dir: string, pkg: string, out: string, ldflags: string, log: string): Promise<void> {
  const tmp = `${out}.tmp`;
  await rm(tmp, { force: true });
  await run("go", ["build", "-trimpath", "-ldflags", ldflags, "-o", tmp, pkg], dir, log, basename(out));
  await rename(tmp, out); // atomic: a half-written binary is never found
}

async function checkGo(): Promise<void> {
  try {
    await run("go", ["version"], process.cwd(), undefined, "go version");
  } catch {
    throw new GoNotFoundError();
  }
}

/** Run a command, appending its output to the build log; resolves with stdout. */
function run(
  cmd: string,
  args: string[],
  cwd: string,
  log: string | undefined,
  step: string,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...process.env, GOTOOLCHAIN: "local", CGO_ENABLED: "0", GOFLAGS: "-mod=mod" };
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    const out = log ? createWriteStream(log, { flags: "a" }) : undefined;
    out?.write(`\n$ ${cmd} ${args.join(" ")}\n`);
    let stdout = "";
    let tail = "";
    child.stdout.on("data", (d: Buffer) => {
      stdout += d.toString();
      out?.write(d);
    });
    child.stderr.on("data", (d: Buffer) => {
      tail = (tail + d.toString()).slice(-4000);
      out?.write(d);
    });
    child.on("error", (err) => {
      out?.end();
      reject(err);
    });
    child.on("close", (code) => {
      out?.end();
      if (code === 0) resolve(stdout);
      else reject(new BuildError(step, log ?? "(no log)", tailLines(tail + stdout.slice(-2000), 30)));
    });
  });
}

function tailLines(text: string, n: number): string {
  return text.trimEnd().split("\n").slice(-n).join("\n");
}
