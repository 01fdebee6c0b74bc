/**
 * `opkit doctor`: what this machine has and lacks for opkit, each miss with what to do about it.
 *
 * It must run on any Node from 18 up, because an old Node is the first thing it diagnoses: this module
 * imports only Node's built-ins and is compiled to syntax Node 18 runs. What needs opkit itself (the
 * pinned control-plane release, the kubeconfig loader) is imported dynamically, and only when the Node
 * running it is new enough; on an older one those checks say what they could not look at.
 */
import { execFile } from "node:child_process";
import { existsSync, readFileSync, readdirSync, realpathSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { delimiter, dirname, join, resolve } from "node:path";

/** The oldest Node opkit runs on (@kubernetes/client-node 2 and undici 8 need it). */
export const MIN_NODE = [22, 19] as const;
/** The oldest Go that builds the pinned control plane. */
export const MIN_GO = [1, 26] as const;
/** Free space the first control-plane build needs where Go keeps its caches and opkit its binaries. */
export const BUILD_DISK_BYTES = 6 * 1024 ** 3;
/** Free space running local control planes needs once the binaries are built (etcd data, logs). */
export const RUN_DISK_BYTES = 1024 ** 3;

/** The outcome of one check: `fail` makes the doctor exit 1, `warn` does not. */
export type CheckStatus = "ok" | "warn" | "fail";

/** One line of the report. */
export interface DoctorCheck {
  /** What was checked: node, go, go-proxy, disk, cache, kubeconfig, project. */
  id: string;
  status: CheckStatus;
  /** What was found. */
  summary: string;
  /** What to do about it (for warn and fail). */
  fix?: string;
}

/** The doctor's whole answer. */
export interface DoctorReport {
  /** No check failed. */
  ok: boolean;
  checks: DoctorCheck[];
}

/** What the doctor looks at; the defaults are this process's, tests pass others. */
export interface DoctorOptions {
  /** A project directory to check (default: the current directory, when it holds a package.json). */
  dir?: string;
  /** The environment (PATH, HOME, KUBECONFIG, OPKIT_CACHE_DIR, …). */
  env?: NodeJS.ProcessEnv;
  /** Ask the Go module proxy and the cluster (default true); off for a quick look. */
  network?: boolean;
}

interface Ctx {
  env: NodeJS.ProcessEnv;
  home: string;
  network: boolean;
}

function parseVersion(v: string): number[] {
  return (/(\d+)\.(\d+)(?:\.(\d+))?/.exec(v) ?? []).slice(1).map((n) => Number(n ?? 0));
}

function atLeast(v: number[], min: readonly number[]): boolean {
  for (let i = 0; i < min.length; i++) {
    const a = v[i] ?? 0;
    const b = min[i] ?? 0;
    if (a !== b) return a > b;
  }
  return true;
}

const minNode = `${MIN_NODE[0]}.${MIN_NODE[1]}`;

/** Whether this process's Node runs opkit (the rest of the CLI and the library). */
export function nodeIsNewEnough(version: string = process.versions.node): boolean {
  return atLeast(parseVersion(version), MIN_NODE);
}

function run(
  cmd: string,
  args: string[],
  env: NodeJS.ProcessEnv,
  timeout = 15_000,
): Promise<{ ok: boolean; out: string }> {
  return new Promise((done) => {
    execFile(cmd, args, { env, timeout, encoding: "utf8" }, (err, stdout, stderr) =>
      done({ ok: !err, out: `${stdout}${stderr}`.trim() }),
    );
  });
}

/** Every `cmd` on PATH, the one a shell runs first. */
function whichAll(cmd: string, env: NodeJS.ProcessEnv): string[] {
  const found: string[] = [];
  for (const d of (env.PATH ?? "").split(delimiter)) {
    if (!d) continue;
    const p = join(d, cmd);
    try {
      if (statSync(p).isFile() && !found.includes(p)) found.push(p);
    } catch {
      // not in this PATH entry
    }
  }
  return found;
}

function which(cmd: string, env: NodeJS.ProcessEnv): string | undefined {
  return whichAll(cmd, env)[0];
}

/** `$OPKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/opkit`, else `~/.cache/opkit` (as opkit/testenv's cacheDir). */
function cacheDirOf(ctx: Ctx): string {
  if (ctx.env.OPKIT_CACHE_DIR) return ctx.env.OPKIT_CACHE_DIR;
  if (ctx.env.XDG_CACHE_HOME) return join(ctx.env.XDG_CACHE_HOME, "opkit");
  return join(ctx.home, ".cache", "opkit");
}

function list(dir: string): string[] {
  try {
    return readdirSync(dir).sort();
  } catch {
    return [];
  }
}

/** Node binaries opkit's Makefile installed into the cache (`<cache>/node/<version>/bin/node`). */
function cachedNodes(ctx: Ctx): { version: string; path: string }[] {
  const root = join(cacheDirOf(ctx), "node");
  return list(root)
    .map((v) => ({ version: v, path: join(root, v, "bin", "node") }))
    .filter((n) => existsSync(n.path));
}

async function checkNode(ctx: Ctx): Promise<DoctorCheck[]> {
  const out: DoctorCheck[] = [];
  const seen = new Set<string>();
  const judge = async (label: string, path: string, version?: string): Promise<DoctorCheck | undefined> => {
    let real = resolve(path);
    try {
      real = realpathSync(path);
    } catch {
      // judged by its own path
    }
    if (seen.has(real)) return undefined;
    seen.add(real);
    const v = version ?? (await run(path, ["--version"], ctx.env, 5000)).out;
    if (!/^v?\d+\.\d+/.test(v))
      return { id: "node", status: "warn", summary: `${label} at ${path} did not answer --version` };
    const good = nodeIsNewEnough(v);
    return {
      id: "node",
      status: good ? "ok" : "fail",
      summary: good
        ? `${label} ${v.replace(/^v?/, "v")} at ${path} is usable (opkit needs ${minNode} or later)`
        : `${label} ${v.replace(/^v?/, "v")} at ${path} is too old: opkit needs Node ${minNode} or later (Node 24 LTS recommended)`,
    };
  };
  const self = await judge("this Node", process.execPath, process.version);
  const onPath = whichAll("node", ctx.env);
  const first = onPath[0] ? await judge("Node on PATH", onPath[0]) : undefined;
  // Nodes later on PATH are shadowed by the first: worth knowing, not a failure.
  const shadowed: DoctorCheck[] = [];
  for (const p of onPath.slice(1)) {
    const c = await judge("Node later on PATH", p);
    if (c) shadowed.push(c.status === "fail" ? { ...c, status: "warn" } : c);
  }
  const cached: DoctorCheck[] = [];
  let usableDir: string | undefined;
  for (const n of cachedNodes(ctx)) {
    const c = await judge("cached Node", n.path);
    if (c) cached.push(c);
    if (c?.status === "ok") usableDir ??= dirname(n.path);
  }
  for (const c of [self, first].filter((c): c is DoctorCheck => c !== undefined)) {
    if (c.status === "fail")
      c.fix = usableDir
        ? `put opkit's cached Node first on PATH: export PATH=${usableDir}:$PATH`
        : "install Node 24 LTS (a version manager such as nvm or fnm: `nvm install 24`; in an opkit checkout `make node` puts one in the cache)";
    out.push(c);
  }
  out.push(...shadowed);
  if (onPath.length === 0)
    out.push({
      id: "node",
      status: "warn",
      summary: "no `node` on PATH (npm scripts and `npx opkit` run the first node on PATH)",
      fix: usableDir ? `export PATH=${usableDir}:$PATH` : "install Node 24 LTS and put it on PATH",
    });
  // A usable cached Node only matters when the ones in use are too old: then it is the fix, not a miss.
  out.push(...cached.map((c) => (c.status === "fail" ? { ...c, status: "warn" as const } : c)));
  return out;
}

interface ControlPlane {
  /** Binaries of the control plane this opkit pins that are not built yet (when opkit could be loaded). */
  missing?: string[];
}

async function pinnedRelease(): Promise<ControlPlane> {
  if (!nodeIsNewEnough()) return {};
  try {
    const { missingBinaries } = await import("opkit/testenv");
    return { missing: missingBinaries() };
  } catch {
    return {};
  }
}

async function checkGo(ctx: Ctx, built: boolean | undefined): Promise<DoctorCheck[]> {
  const needed = built !== true;
  const missStatus: CheckStatus = needed ? "fail" : "warn";
  const why = needed
    ? "the local control plane (`opkit env`, `npm test` of a project) is built from the official Go modules"
    : "the control plane is built already; Go is needed again only for another Kubernetes version";
  const go = which("go", ctx.env);
  if (!go)
    return [
      {
        id: "go",
        status: missStatus,
        summary: `\`go\` is not on PATH: ${why}`,
        fix: `install Go ${MIN_GO.join(".")} or later (e.g. your system's package, or the archive from the Go project) and put its bin/ on PATH`,
      },
    ];
  const v = await run(go, ["version"], ctx.env);
  const version = /go(\d+\.\d+(?:\.\d+)?)/.exec(v.out)?.[1];
  const out: DoctorCheck[] = [];
  if (!version || !atLeast(parseVersion(version), MIN_GO))
    out.push({
      id: "go",
      status: missStatus,
      summary: `${go} is ${version ? `Go ${version}` : `not answering \`go version\` (${v.out.slice(0, 200)})`}: the control plane needs Go ${MIN_GO.join(".")} or later`,
      fix: `install Go ${MIN_GO.join(".")} or later and put it first on PATH`,
    });
  else out.push({ id: "go", status: "ok", summary: `Go ${version} at ${go}` });
  if (!ctx.network) return out;
  const env = await run(go, ["env", "GOPROXY"], ctx.env);
  const proxies = env.out.split(/[,|]/).map((s) => s.trim());
  const proxy = proxies.find((p) => /^https?:\/\//.test(p));
  if (!proxy) {
    out.push({
      id: "go-proxy",
      status: needed && !proxies.includes("direct") ? "fail" : "warn",
      summary: `GOPROXY is ${JSON.stringify(env.out)}: no module proxy to fetch the Kubernetes modules from`,
      fix: "set GOPROXY to a module proxy (go env -w GOPROXY=<proxy>,direct)",
    });
    return out;
  }
  try {
    const res = await fetch(`${proxy.replace(/\/$/, "")}/k8s.io/api/@v/list`, {
      signal: AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer();
    out.push(
      res.ok
        ? { id: "go-proxy", status: "ok", summary: `the Go module proxy ${proxy} answers` }
        : {
            id: "go-proxy",
            status: needed ? "fail" : "warn",
            summary: `the Go module proxy ${proxy} answered ${res.status} for k8s.io/api`,
            fix: "check GOPROXY (go env GOPROXY) and any proxy settings (HTTPS_PROXY)",
          },
    );
  } catch (err) {
    out.push({
      id: "go-proxy",
      status: needed ? "fail" : "warn",
      summary: `the Go module proxy ${proxy} is not reachable: ${err instanceof Error ? err.message : String(err)}`,
      fix: "check the network, GOPROXY (go env GOPROXY) and HTTPS_PROXY",
    });
  }
  return out;
}

/** Free bytes on the filesystem holding `path` (or its nearest existing parent), from `df`. */
async function freeBytes(path: string, env: NodeJS.ProcessEnv): Promise<number | undefined> {
  let p = resolve(path);
  while (!existsSync(p) && dirname(p) !== p) p = dirname(p);
  const r = await run("df", ["-Pk", p], env, 5000);
  const fields = r.out.split("\n")[1]?.trim().split(/\s+/);
  const kb = Number(fields?.[3]);
  return r.ok && Number.isFinite(kb) ? kb * 1024 : undefined;
}

const gib = (n: number): string => `${(n / 1024 ** 3).toFixed(1)} GiB`;

async function checkDisk(ctx: Ctx, built: boolean | undefined): Promise<DoctorCheck[]> {
  const need = built === true ? RUN_DISK_BYTES : BUILD_DISK_BYTES;
  const what = built === true ? "running local control planes" : "the first control-plane build";
  const places: Record<string, string> = { "opkit cache": cacheDirOf(ctx) };
  const go = which("go", ctx.env);
  if (go && built !== true) {
    for (const v of ["GOCACHE", "GOMODCACHE"]) {
      const r = await run(go, ["env", v], ctx.env, 5000);
      if (r.ok && r.out) places[v] = r.out;
    }
  }
  const out: DoctorCheck[] = [];
  for (const [label, path] of Object.entries(places)) {
    const free = await freeBytes(path, ctx.env);
    if (free === undefined) {
      out.push({
        id: "disk",
        status: "warn",
        summary: `could not read the free space at ${path} (${label})`,
      });
      continue;
    }
    out.push(
      free >= need
        ? {
            id: "disk",
            status: "ok",
            summary: `${gib(free)} free at ${path} (${label}; ${what} needs ${gib(need)})`,
          }
        : {
            id: "disk",
            status: "fail",
            summary: `only ${gib(free)} free at ${path} (${label}): ${what} needs about ${gib(need)}`,
            fix: `free space there, or point ${label === "opkit cache" ? "OPKIT_CACHE_DIR" : label} at a disk with room`,
          },
    );
  }
  return out;
}

function checkCache(ctx: Ctx, cp: ControlPlane): DoctorCheck[] {
  const dir = cacheDirOf(ctx);
  if (!existsSync(dir))
    return [
      {
        id: "cache",
        status: "ok",
        summary: `the cache folder ${dir} does not exist yet: the first \`opkit env up\` (or \`npm test\`) builds the control plane into it (8-15 minutes on 2 cores)`,
      },
    ];
  const releases = list(join(dir, "controlplane")).map((key) => {
    const bins = list(join(dir, "controlplane", key, "bin"));
    return `${key} (${bins.length ? bins.join(", ") : "nothing built"})`;
  });
  const parts = [
    releases.length ? `control planes: ${releases.join("; ")}` : "no control plane built",
    `Node: ${list(join(dir, "node")).join(", ") || "none"}`,
    `envs: ${list(join(dir, "envs")).join(", ") || "none"}`,
    `packed tarballs: ${list(join(dir, "packs")).filter((f) => f.endsWith(".tgz")).length}`,
  ];
  const out: DoctorCheck[] = [{ id: "cache", status: "ok", summary: `${dir}: ${parts.join("; ")}` }];
  if (cp.missing)
    out.push(
      cp.missing.length === 0
        ? { id: "cache", status: "ok", summary: "the control plane this opkit pins is built" }
        : {
            id: "cache",
            status: "warn",
            summary: `the control plane this opkit pins is not built yet (missing: ${cp.missing.join(", ")})`,
            fix: "`npx opkit env build` builds it now (8-15 minutes on 2 cores); otherwise the first `opkit env up` or `npm test` does",
          },
    );
  return out;
}

function kubeconfigPath(ctx: Ctx): string | undefined {
  const candidates = ctx.env.KUBECONFIG
    ? ctx.env.KUBECONFIG.split(delimiter).filter(Boolean)
    : [join(ctx.home, ".kube", "config")];
  return candidates.find((p) => existsSync(p));
}

async function checkKubeconfig(ctx: Ctx): Promise<DoctorCheck[]> {
  const path = kubeconfigPath(ctx);
  if (!path)
    return [
      {
        id: "kubeconfig",
        status: "warn",
        summary: `no kubeconfig (${ctx.env.KUBECONFIG ? `KUBECONFIG=${ctx.env.KUBECONFIG}` : join(ctx.home, ".kube", "config")}): needed only for \`opkit run\`, \`install\` and \`deploy\` against a cluster`,
        fix: "`npx opkit env up` starts a local control plane and prints its kubeconfig; or point KUBECONFIG at your cluster's",
      },
    ];
  if (!nodeIsNewEnough() || !ctx.network)
    return [
      {
        id: "kubeconfig",
        status: "ok",
        summary: `kubeconfig ${path} (its cluster not asked: ${ctx.network ? `needs Node ${minNode} to load it` : "--offline"})`,
      },
    ];
  try {
    const { KubeClient } = await import("opkit");
    const client = await KubeClient.load({ kubeconfig: path });
    try {
      const v = await client.raw<{ gitVersion?: string }>("GET", "/version", undefined, {
        signal: AbortSignal.timeout(8000),
      });
      return [
        {
          id: "kubeconfig",
          status: "ok",
          summary: `kubeconfig ${path}: the cluster at ${client.config.server} answers (${v.gitVersion ?? "version unknown"})`,
        },
      ];
    } finally {
      await client.close();
    }
  } catch (err) {
    return [
      {
        id: "kubeconfig",
        status: "fail",
        summary: `kubeconfig ${path}: its current cluster does not answer: ${err instanceof Error ? err.message.split("\n")[0] : String(err)}`,
        fix: "start the cluster (for a local one: `npx opkit env up`), switch context (`kubectl config use-context`), or point KUBECONFIG elsewhere",
      },
    ];
  }
}

/** Does `version` satisfy `range`? Exact versions, ^, ~, >=, x-ranges; anything else is not judged. */
export function satisfies(version: string, range: string): boolean | undefined {
  const v = parseVersion(version);
  const r = range.trim();
  if (r === "*" || r === "latest") return true;
  const m = /^(\^|~|>=|=)?v?(\d+)(?:\.(\d+|x|\*))?(?:\.(\d+|x|\*))?(-[\w.]+)?$/.exec(r);
  if (!m) return undefined;
  const [, op = "=", ...rest] = m;
  const parts = rest
    .slice(0, 3)
    .map((p) => (p === undefined || p === "x" || p === "*" ? undefined : Number(p)));
  const base = parts.map((p) => p ?? 0);
  if (op === ">=") return atLeast(v, base);
  if (!atLeast(v, base)) return false;
  const [maj, min] = base as [number, number, number];
  if (op === "^")
    return maj > 0 ? v[0] === maj : min > 0 ? v[0] === 0 && v[1] === min : v.join(".") === base.join(".");
  if (op === "~" || parts[2] === undefined) return v[0] === maj && (parts[1] === undefined || v[1] === min);
  return v.join(".") === base.join(".");
}

function readJson(file: string): Record<string, unknown> | undefined {
  try {
    return JSON.parse(readFileSync(file, "utf8")) as Record<string, unknown>;
  } catch {
    return undefined;
  }
}

async function checkProject(ctx: Ctx, dir: string): Promise<DoctorCheck[]> {
  const manifest = readJson(join(dir, "package.json"));
  if (!manifest) return [];
  const deps = {
    ...(manifest.devDependencies as Record<string, string> | undefined),
    ...(manifest.dependencies as Record<string, string> | undefined),
  };
  const names = ["opkit", "@opkit/cli"].filter((n) => deps[n] !== undefined);
  if (names.length === 0) return [];
  const out: DoctorCheck[] = [];
  const installed: Record<string, string> = {};
  for (const name of names) {
    const spec = deps[name]!;
    const have = readJson(join(dir, "node_modules", name, "package.json"))?.version as string | undefined;
    if (!have) {
      out.push({
        id: "project",
        status: "fail",
        summary: `${name} (${spec} in package.json) is not installed in ${dir}/node_modules`,
        fix: `npm install (in ${dir})`,
      });
      continue;
    }
    installed[name] = have;
    const fits = /^(file|link|git|https?):|\//.test(spec) ? undefined : satisfies(have, spec);
    out.push(
      fits === false
        ? {
            id: "project",
            status: "fail",
            summary: `${name}: package.json asks for ${spec}, node_modules has ${have}`,
            fix: `npm install (in ${dir})`,
          }
        : { id: "project", status: "ok", summary: `${name} ${have} installed (package.json: ${spec})` },
    );
  }
  const cliPeer = (
    readJson(join(dir, "node_modules", "@opkit", "cli", "package.json"))?.peerDependencies as
      Record<string, string> | undefined
  )?.opkit;
  if (installed.opkit && cliPeer && satisfies(installed.opkit, cliPeer) === false)
    out.push({
      id: "project",
      status: "fail",
      summary: `@opkit/cli ${installed["@opkit/cli"]} works with opkit ${cliPeer}, but opkit ${installed.opkit} is installed`,
      fix: `install matching versions: npm install opkit@${cliPeer} (or move @opkit/cli to opkit's version)`,
    });
  const cliBin = join(dir, "node_modules", "@opkit", "cli", "bin", "opkit.js");
  if (existsSync(join(dir, "src", "operator.ts")) && existsSync(cliBin) && nodeIsNewEnough()) {
    const r = await run(process.execPath, [cliBin, "generate", "--check", "--dir", dir], ctx.env, 120_000);
    out.push(
      r.ok
        ? {
            id: "project",
            status: "ok",
            summary: "the generated files match the project's definition (opkit generate --check)",
          }
        : {
            id: "project",
            status: "fail",
            summary: `opkit generate --check: ${r.out.split("\n").slice(-6).join(" | ")}`,
            fix: `npx opkit generate (in ${dir}) and commit what it writes`,
          },
    );
  }
  return out;
}

/** Every check, in the order a user fixes them. */
export async function runDoctor(opts: DoctorOptions = {}): Promise<DoctorReport> {
  const env = opts.env ?? process.env;
  const ctx: Ctx = { env, home: env.HOME || homedir(), network: opts.network ?? true };
  const cp = await pinnedRelease();
  const built = cp.missing ? cp.missing.length === 0 : undefined;
  const dir = resolve(opts.dir ?? process.cwd());
  const checks = [
    ...(await checkNode(ctx)),
    ...(await checkGo(ctx, built)),
    ...(await checkDisk(ctx, built)),
    ...checkCache(ctx, cp),
    ...(await checkKubeconfig(ctx)),
    ...(await checkProject(ctx, dir)),
  ];
  return { ok: checks.every((c) => c.status !== "fail"), checks };
}

const MARK: Record<CheckStatus, string> = { ok: "ok  ", warn: "warn", fail: "FAIL" };

/** The report as text for a person: one line per check, its fix indented below. */
export function formatReport(report: DoctorReport): string {
  const lines = report.checks.map(
    (c) =>
      `${MARK[c.status]} ${c.id.padEnd(10)} ${c.summary}${c.fix ? `\n     ${" ".repeat(10)} fix: ${c.fix}` : ""}`,
  );
  lines.push(
    report.ok
      ? "opkit doctor: nothing missing"
      : `opkit doctor: ${report.checks.filter((c) => c.status === "fail").length} problem(s); the fix is under each FAIL`,
  );
  return `${lines.join("\n")}\n`;
}

/**
 * Machine-caused failures (no Go, a full disk, an old Node) get a pointer to `opkit doctor` in the CLI's
 * error output; mistakes in the input do not.
 */
export function machineCaused(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  return (
    err.name === "GoNotFoundError" ||
    code === "ENOSPC" ||
    /ENOSPC|no space left on device/i.test(err.message) ||
    (err.name === "BuildError" && /go: |cannot find|proxy|dial tcp|no space/i.test(err.message))
  );
}

/** The hint the CLI prints after a machine-caused error, and the launcher after an old Node. */
export const DOCTOR_HINT =
  "`opkit doctor` (or `npx @opkit/cli doctor`) checks this machine and says what to install";

/** `opkit doctor [--json] [--offline] [--dir <dir>]` as a program: prints the report, returns the exit code. */
export async function doctorMain(argv: readonly string[]): Promise<number> {
  let json = false;
  let network = true;
  let dir: string | undefined;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === "--json") json = true;
    else if (a === "--offline") network = false;
    else if (a === "--dir") dir = argv[++i];
    else if (a.startsWith("--dir=")) dir = a.slice("--dir=".length);
    else if (a === "-h" || a === "--help") {
      process.stdout.write(
        "usage: opkit doctor [--json] [--offline] [--dir <project>]\n" +
          "Checks Node, Go and its module proxy, disk, opkit's cache, the kubeconfig's cluster and the project in --dir\n" +
          "(default: the current directory). Exit 0 when nothing is missing, 1 otherwise.\n",
      );
      return 0;
    } else {
      process.stderr.write(`opkit doctor: unknown argument ${a}; use --json, --offline or --dir <project>\n`);
      return 2;
    }
  }
  if (dir !== undefined && !existsSync(dir)) {
    process.stderr.write(`opkit doctor: --dir ${dir} does not exist\n`);
    return 2;
  }
  const report = await runDoctor({ dir, network });
  process.stdout.write(json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report));
  return report.ok ? 0 : 1;
}
