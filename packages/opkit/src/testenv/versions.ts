/**
 * The Kubernetes releases opkit builds and tests against, which one an env runs, and where their binaries
 * and environments live on disk.
 *
 * Each supported minor has one tested patch release; a user names a minor ("1.34") to get it, or a full
 * version ("v1.34.2") that is taken as given. etcd and kwok are one version each, shared by every
 * Kubernetes release (each is built once, in a wrapper module of its own).
 */
import { homedir } from "node:os";
import { join } from "node:path";

/** The Kubernetes release an env runs unless told otherwise (the newest that passes everything). */
export const KUBERNETES_VERSION = "v1.36.3";
/**
 * The supported Kubernetes minors, each with the patch release opkit tests (the newest that builds with Go
 * 1.26). Oldest first.
 */
export const SUPPORTED_KUBERNETES_VERSIONS: readonly string[] = Object.freeze([
  "v1.34.4",
  "v1.35.4",
  "v1.36.3",
  "v1.37.2",
]);
/**
 * The etcd release of every env: the newest 3.6 patch, which Kubernetes 1.34 to 1.37 all support (1.34 was
 * tested with 3.6.4, 1.37 with 3.7.0; the client of each speaks to any 3.6 server).
 */
export const ETCD_VERSION = "v3.6.16";
/** kwok v0.8.0 (client-go 0.36, Go 1.26); it drives nodes and pods of every supported API server. */
export const KWOK_VERSION = "v0.8.0";
/** Stamped into the binaries; fixed so that rebuilds are reproducible and hit Go's build cache. */
export const BUILD_DATE = "2026-11-01T00:00:00Z";
/**
 * Bumped whenever the build recipe (flags, wrapper modules) changes, so caches rebuild. 2: etcd and kwok
 * are built once in wrapper modules of their own instead of etcd inside each Kubernetes module graph.
 */
const RECIPE = "2";
/** The environment variable choosing the Kubernetes version of envs and tests (`1.34` or `v1.34.2`). */
export const KUBERNETES_VERSION_VARIABLE = "OPKIT_KUBERNETES_VERSION";

/** The binaries a control plane is built from. */
export const COMPONENT_BINARIES = [
  "etcd",
  "kube-apiserver",
  "kube-controller-manager",
  "kube-scheduler",
  "kubectl",
  "kwok",
] as const;
/** One of COMPONENT_BINARIES. */
export type BinaryName = (typeof COMPONENT_BINARIES)[number];

/** A Kubernetes version that is not a supported minor, or not a version at all; names where it came from. */
export class UnsupportedKubernetesVersionError extends Error {
  /** Where the version was given: the flag, option or environment variable. */
  readonly option: string;
  constructor(option: string, given: string, problem: string) {
    super(
      `${option}: ${problem} (got "${given.slice(0, 40)}"); supported: ` +
        `${SUPPORTED_KUBERNETES_VERSIONS.map((v) => minorOf(v)).join(", ")} ` +
        `(a minor picks its tested patch: ${SUPPORTED_KUBERNETES_VERSIONS.join(", ")}), or a full version of one of them such as v1.34.2`,
    );
    this.name = "UnsupportedKubernetesVersionError";
    this.option = option;
  }
}

const VERSION_RE = /^v?(\d+)\.(\d+)(?:\.(\d+))?$/;

function minorOf(version: string): string {
  const m = VERSION_RE.exec(version);
  return m ? `${m[1]}.${m[2]}` : version;
}

/**
 * The Kubernetes release to run: `given` (a minor such as "1.34" picks its tested patch; a full version such as
 * "v1.34.2" is taken as given), else `$OPKIT_KUBERNETES_VERSION`, else KUBERNETES_VERSION. Throws
 * UnsupportedKubernetesVersionError naming `option` (or the variable) for anything outside the supported minors.
 */
export function resolveKubernetesVersion(given?: string, option = "--kubernetes-version"): string {
  let text = given?.trim();
  let from = option;
  if (!text) {
    text = process.env[KUBERNETES_VERSION_VARIABLE]?.trim();
    from = KUBERNETES_VERSION_VARIABLE;
  }
  if (!text) return KUBERNETES_VERSION;
  const m = VERSION_RE.exec(text);
  if (!m) throw new UnsupportedKubernetesVersionError(from, text, "not a Kubernetes version");
  const minor = `${Number(m[1])}.${Number(m[2])}`;
  const tested = SUPPORTED_KUBERNETES_VERSIONS.find((v) => minorOf(v) === minor);
  if (!tested)
    throw new UnsupportedKubernetesVersionError(from, text, `Kubernetes ${minor} is not supported`);
  return m[3] === undefined ? tested : `v${minor}.${Number(m[3])}`;
}

/** `$OPKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/opkit`, else `~/.cache/opkit`: outside any checkout, so clones share it. */
export function cacheDir(): string {
  if (process.env.OPKIT_CACHE_DIR) return process.env.OPKIT_CACHE_DIR;
  if (process.env.XDG_CACHE_HOME) return join(process.env.XDG_CACHE_HOME, "opkit");
  return join(homedir(), ".cache", "opkit");
}

/** The directory holding every cached build (one directory per Kubernetes release, etcd and kwok). */
export function buildsDir(): string {
  return join(cacheDir(), "controlplane");
}

/**
 * A key naming a Kubernetes release (default: the one `resolveKubernetesVersion()` picks), the etcd and kwok
 * it runs with and the build recipe; the cache directory is named after it, so any change rebuilds.
 */
export function releaseKey(version: string = resolveKubernetesVersion()): string {
  return `k8s-${version}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_r${RECIPE}`;
}

/** The cache directory of a Kubernetes release (default: the one `resolveKubernetesVersion()` picks). */
export function releaseDir(version: string = resolveKubernetesVersion()): string {
  return join(buildsDir(), releaseKey(version));
}

/**
 * The directory holding a release's six binaries (default: the release `resolveKubernetesVersion()` picks);
 * etcd and kwok there are links to their one shared build.
 */
export function binDir(version: string = resolveKubernetesVersion()): string {
  return join(releaseDir(version), "bin");
}

/** The cache directory of the one etcd (or kwok) build all releases link to. */
export function sharedBuildDir(tool: "etcd" | "kwok"): string {
  return join(
    buildsDir(),
    tool === "etcd" ? `etcd-${ETCD_VERSION}_r${RECIPE}` : `kwok-${KWOK_VERSION}_r${RECIPE}`,
  );
}

/** The directory holding every env's state. */
export function envsDir(): string {
  return join(cacheDir(), "envs");
}
