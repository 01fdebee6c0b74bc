/**
 * A pinned helm binary for tests that render generated charts: built once from the Go module proxy
 * with the machine's Go (no helm is assumed on the machine), cached beside the control plane, and
 * `helm template` / `helm lint` wrappers. Test tooling only: the generators never run tools.
 */
import { spawn } from "node:child_process";
import { access, mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import { constants } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { cacheDir } from "./versions.ts";

/** helm could not be built or exited non-zero; the message carries its output's tail. */
export class HelmError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "HelmError";
  }
}

/** The helm release `ensureHelm` builds; pinned so test results do not change under us. */
export const HELM_VERSION = "v3.22.0";

/** Where `ensureHelm` puts the helm binary of a version (in the shared cache, outside any checkout). */
export function helmPath(version = HELM_VERSION): string {
  return join(cacheDir(), "tools", `helm-${version}`, "helm");
}

function run(cmd: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { cwd, env, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let all = "";
    child.stdout.on("data", (d: Buffer) => ((stdout += d.toString()), (all += d.toString())));
    child.stderr.on("data", (d: Buffer) => (all += d.toString()));
    child.on("error", (err) => reject(err));
    // Resolves with stdout only (callers parse it); failures carry both streams' tail.
    child.on("exit", (code) =>
      code === 0
        ? resolve(stdout)
        : reject(new HelmError(`${cmd} ${args.join(" ")} exited ${code}:\n${all.slice(-4000)}`)),
    );
  });
}

/**
 * Path to a helm binary: `$OPKIT_HELM` if set, else a cached build of HELM_VERSION, else build one with
 * the local Go toolchain from the module proxy (a few minutes, once). Progress goes to `onProgress`.
 */
export async function ensureHelm(
  opts: { version?: string; onProgress?: (line: string) => void } = {},
): Promise<string> {
  if (process.env.OPKIT_HELM) return process.env.OPKIT_HELM;
  const version = opts.version ?? HELM_VERSION;
  const target = helmPath(version);
  const progress = opts.onProgress ?? ((l: string) => process.stderr.write(`opkit: ${l}\n`));
  if (
    await access(target, constants.X_OK).then(
      () => true,
      () => false,
    )
  )
    return target;

  const env = { ...process.env, GOTOOLCHAIN: "local", CGO_ENABLED: "0", GOFLAGS: "-mod=mod" };
  try {
    await run("go", ["version"], tmpdir(), env);
  } catch (err) {
    throw new HelmError(
      `building helm ${version} needs the Go toolchain on PATH (${err instanceof Error ? err.message : String(err)}): install Go, or set OPKIT_HELM to a helm binary`,
    );
  }
  const work = await mkdtemp(join(tmpdir(), "opkit-helm-"));
  const started = Date.now();
  try {
    await writeFile(join(work, "go.mod"), "module opkit.dev/helm-build\n\ngo 1.24\n");
    // A blank import keeps the wrapper module's requirements pinned to helm's own go.mod.
    await writeFile(
      join(work, "tools.go"),
      '//go:build tools\n\npackage tools\n\nimport _ "helm.sh/helm/v3/cmd/helm"\n',
    );
    progress(`building helm ${version}: resolving modules from the Go module proxy`);
    await run("go", ["get", `helm.sh/helm/v3/cmd/helm@${version}`], work, env);
    progress(`building helm ${version}: compiling (takes a few minutes the first time)`);
    await mkdir(join(target, ".."), { recursive: true });
    const tmp = `${target}.tmp-${process.pid}`;
    // helm reports its version from an ldflag, as its own Makefile sets it.
    const ldflags = `-X helm.sh/helm/v3/internal/version.version=${version}`;
    await run("go", ["build", "-ldflags", ldflags, "-o", tmp, "helm.sh/helm/v3/cmd/helm"], work, env);
    // Rename is atomic: a concurrent caller sees either no binary or a complete one.
    await rename(tmp, target);
    progress(`built helm ${version} in ${Math.round((Date.now() - started) / 1000)} s: ${target}`);
    return target;
  } catch (err) {
    if (err instanceof HelmError) {
      throw new HelmError(
        `could not build helm ${version} (needs network access to the Go module proxy): ${err.message}`,
      );
    }
    throw err;
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** Run `helm template` on a chart directory; returns the rendered YAML stream. */
export async function helmTemplate(
  helm: string,
  chartDir: string,
  opts: { release?: string; namespace?: string; includeCrds?: boolean; set?: Record<string, string> } = {},
): Promise<string> {
  const args = ["template", opts.release ?? "release", chartDir];
  if (opts.namespace) args.push("--namespace", opts.namespace);
  if (opts.includeCrds ?? true) args.push("--include-crds");
  for (const [k, v] of Object.entries(opts.set ?? {})) args.push("--set", `${k}=${v}`);
  return run(helm, args, process.cwd(), {
    ...process.env,
    HELM_CACHE_HOME: join(tmpdir(), "opkit-helm-cache"),
  });
}

/**
 * Run `helm lint --strict` on a chart directory (warnings fail too); returns helm's report. Throws
 * HelmError with the report when the chart has errors or warnings.
 */
export async function helmLint(helm: string, chartDir: string): Promise<string> {
  return run(helm, ["lint", "--strict", chartDir], process.cwd(), {
    ...process.env,
    HELM_CACHE_HOME: join(tmpdir(), "opkit-helm-cache"),
  });
}
