/**
 * The pinned control-plane release and where its binaries and environments live on disk.
 */
import { homedir } from "node:os";
import { join } from "node:path";

/** The Kubernetes release opkit builds and tests against (the newest that builds with the machine's Go 1.26). */
export const KUBERNETES_VERSION = "v1.36.3";
/** The etcd release Kubernetes v1.36.3 requires in its own go.mod (built from that module graph). */
export const ETCD_VERSION = "v3.6.8";
/** kwok v0.8.0 is built against Kubernetes 0.36 libraries and Go 1.26, matching the release above. */
export const KWOK_VERSION = "v0.8.0";
/** Stamped into the binaries; fixed so that rebuilds are reproducible and hit Go's build cache. */
export const BUILD_DATE = "2026-11-01T00:00:00Z";
/** Bumped whenever the build recipe (flags, wrapper modules) changes, so caches rebuild. */
const RECIPE = "1";

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

/** `$OPKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/opkit`, else `~/.cache/opkit`: outside any checkout, so clones share it. */
export function cacheDir(): string {
  if (process.env.OPKIT_CACHE_DIR) return process.env.OPKIT_CACHE_DIR;
  if (process.env.XDG_CACHE_HOME) return join(process.env.XDG_CACHE_HOME, "opkit");
  return join(homedir(), ".cache", "opkit");
}

/**
 * A key naming the pinned versions and build recipe; the cache directory is named after it, so a version bump
 * rebuilds.
 */
export function releaseKey(): string {
  return `k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_r${RECIPE}`;
}

/** The cache directory of the pinned release. */
export function releaseDir(): string {
  return join(cacheDir(), "controlplane", releaseKey());
}

/** The directory holding the built binaries. */
export function binDir(): string {
  return join(releaseDir(), "bin");
}

/** The directory holding every env's state. */
export function envsDir(): string {
  return join(cacheDir(), "envs");
}
