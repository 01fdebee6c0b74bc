/**
 * Builds the control plane from the official Go modules with the machine's own Go toolchain.
 *
 * k8s.io/kubernetes cannot be `go install`ed: its go.mod replaces every staging module with a local
 * path. A wrapper module of ours requires the release and replaces each staging module with its
 * published v0.X.Y tag (read from the release's own go.mod, never typed by hand). etcd is built from
 * the same module graph (the version Kubernetes was tested with). kwok gets a wrapper of its own so
 * that its library versions cannot clash with the control plane's.
 */
import { spawn } from "node:child_process";
import { createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import {
  BUILD_DATE,
  COMPONENT_BINARIES,
  ETCD_VERSION,
  KUBERNETES_VERSION,
  KWOK_VERSION,
  binDir,
  releaseDir,
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

export interface BuildOptions {
  onProgress?: (p: BuildProgress) => void;
  /** Rebuild even when the binaries exist. */
  force?: boolean;
}

/** What `buildControlPlane` did. */
export interface BuildResult {
  /** Where the binaries are. */
  binDir: string;
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

/**
 * The control-plane binaries not built yet for the pinned versions; empty means `env up` can start without a
 * build.
 */
export function missingBinaries(): BinaryName[] {
  return COMPONENT_BINARIES.filter((b) => !existsSync(join(binDir(), b)));
}

/** Build every missing binary (all of them with `force`). Safe to call when everything is cached. */
export async function buildControlPlane(opts: BuildOptions = {}): Promise<BuildResult> {
  const started = Date.now();
  const todo = opts.force ? [...COMPONENT_BINARIES] : missingBinaries();
  const progress = (step: string, state: BuildProgress["state"], since: number): void =>
    opts.onProgress?.({ step, state, elapsedMs: Date.now() - since });
  if (todo.length === 0) {
    progress("control plane", "cached", started);
    return { binDir: binDir(), built: [], elapsedMs: 0 };
  }
  await checkGo();
  const root = releaseDir();
  const log = join(root, "build.log");
  await mkdir(binDir(), { recursive: true });
  await writeFile(log, `opkit control-plane build ${new Date().toISOString()}\n`);

  const k8sTodo = todo.filter((b) => b !== "kwok");
  if (k8sTodo.length > 0) {
    const dir = join(root, "src", "kubernetes");
    let t = Date.now();
    progress("kubernetes module graph", "start", t);
    await writeKubernetesWrapper(dir, log);
    progress("kubernetes module graph", "done", t);
    for (const b of k8sTodo) {
      t = Date.now();
      progress(b, "start", t);
      const pkg = b === "etcd" ? "go.etcd.io/etcd/server/v3" : K8S_PACKAGES[b];
      const ldflags = b === "etcd" ? "-s -w" : `-s -w ${versionLdflags()}`;
      await goBuild(dir, pkg, b, ldflags, log);
      progress(b, "done", t);
    }
  }
  if (todo.includes("kwok")) {
    const dir = join(root, "src", "kwok");
    const t = Date.now();
    progress("kwok", "start", t);
    await mkdir(dir, { recursive: true });
    await writeFile(
      join(dir, "go.mod"),
      `module opkit.dev/testenv/kwok\n\ngo 1.26.0\n\nrequire sigs.k8s.io/kwok ${KWOK_VERSION}\n`,
    );
    await writeFile(join(dir, "tools.go"), toolsFile(["sigs.k8s.io/kwok/cmd/kwok"]));
    await run("go", ["mod", "tidy"], dir, log, "kwok module graph");
    await goBuild(dir, "sigs.k8s.io/kwok/cmd/kwok", "kwok", "-s -w", log);
    progress("kwok", "done", t);
  }
  return { binDir: binDir(), built: todo, elapsedMs: Date.now() - started };
}

function versionLdflags(): string {
  const [major, minor] = KUBERNETES_VERSION.replace(/^v/, "").split(".");
  const v = "k8s.io/component-base/version";
  return [
    `-X ${v}.gitVersion=${KUBERNETES_VERSION}`,
    `-X ${v}.gitMajor=${major}`,
    `-X ${v}.gitMinor=${minor}`,
    `-X ${v}.gitTreeState=clean`,
    `-X ${v}.buildDate=${BUILD_DATE}`,
  ].join(" ");
}

async function writeKubernetesWrapper(dir: string, log: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  // The release's own go.mod names every staging module and the go/godebug lines to copy.
  const dl = await run(
    "go",
    ["mod", "download", "-json", `k8s.io/kubernetes@${KUBERNETES_VERSION}`],
    dir,
    log,
    "download k8s.io/kubernetes",
  );
  const info = JSON.parse(dl) as { GoMod?: string; Error?: string };
  if (!info.GoMod) throw new BuildError("download k8s.io/kubernetes", log, info.Error ?? dl.slice(-2000));
  const upstream = await readFile(info.GoMod, "utf8");
  const goLine = /^go (\S+)$/m.exec(upstream)?.[1] ?? "1.26.0";
  const godebug = /^godebug (.+)$/m.exec(upstream)?.[0] ?? "";
  const stagingTag = KUBERNETES_VERSION.replace(/^v1\./, "v0.");
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
    `require (\n\tk8s.io/kubernetes ${KUBERNETES_VERSION}\n\tgo.etcd.io/etcd/server/v3 ${ETCD_VERSION}\n)`,
    "",
    "replace (",
    ...staging.map((m) => `\t${m} => ${m} ${stagingTag}`),
    ")",
    "",
  ].join("\n");
  await writeFile(join(dir, "go.mod"), gomod);
  await writeFile(
    join(dir, "tools.go"),
    toolsFile(["go.etcd.io/etcd/server/v3", ...Object.values(K8S_PACKAGES)]),
  );
  await run("go", ["mod", "tidy"], dir, log, "kubernetes module graph");
}

function toolsFile(imports: string[]): string {
  return `//go:build tools\n\n// Generated by opkit: keeps the built commands in the module graph.\npackage tools\n\nimport (\n${imports.map((i) => `\t_ "${i}"`).join("\n")}\n)\n`;
}

async function goBuild(dir: string, pkg: string, name: string, ldflags: string, log: string): Promise<void> {
  const tmp = join(binDir(), `.${name}.tmp`);
  await rm(tmp, { force: true });
  await run("go", ["build", "-trimpath", "-ldflags", ldflags, "-o", tmp, pkg], dir, log, name);
  await rename(tmp, join(binDir(), name)); // atomic: a half-written binary is never found
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
