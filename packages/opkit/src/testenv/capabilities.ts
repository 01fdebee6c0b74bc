/**
 * What a built Kubernetes release accepts: the flags and feature gates of kube-apiserver,
 * kube-controller-manager and kube-scheduler, read from their own `--help` (discovery, not a table typed
 * by hand), cached beside the binaries. An env of an older release leaves out the gates and flags that
 * release lacks, with a note, instead of failing to start; a gate no built release knows is an error
 * (a typo), as the components themselves would say.
 */
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { InvalidEnvOptionError } from "./settings.ts";
import { SUPPORTED_KUBERNETES_VERSIONS, binDir } from "./versions.ts";

/** The Kubernetes components whose flags and gates depend on the release. */
export const VERSIONED_COMPONENTS = ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] as const;
/** One of VERSIONED_COMPONENTS. */
export type VersionedComponent = (typeof VERSIONED_COMPONENTS)[number];

/**
 * Gates opkit's own test envs turn on, with the first release that has them, so an older release leaves them
 * out with a note even when no newer release is built to ask.
 */
const GATES_OPKIT_USES: Readonly<Record<string, string>> = { ShardedListAndWatch: "v1.36" };

/** The flags and feature gates one component of one release accepts. */
export interface ComponentCapabilities {
  /** Long flag names without the dashes, e.g. "etcd-servers". */
  flags: ReadonlySet<string>;
  /** Feature gate names, e.g. "ShardedListAndWatch". */
  featureGates: ReadonlySet<string>;
}

/**
 * Parse a component's `--help`: each flag line starts with `--name`; the `--feature-gates` text lists every
 * gate as `Name=true|false` (since 1.31 prefixed with its component, `kube:Name=true|false`).
 */
export function parseHelp(text: string): ComponentCapabilities {
  const flags = new Set([...text.matchAll(/^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)/gm)].map((m) => m[1] ?? ""));
  const featureGates = new Set(
    [...text.matchAll(/(?:^|[\s,])(?:[a-z][a-z0-9-]*:)?([A-Z][A-Za-z0-9]*)=true\|false/gm)].map(
      (m) => m[1] ?? "",
    ),
  );
  return { flags, featureGates };
}

/** The help text of a component of a built release (cached as `<bin>/<component>.help`), or undefined when not built. */
async function helpText(version: string, component: VersionedComponent): Promise<string | undefined> {
  const bin = binDir(version);
  const cached = join(bin, `${component}.help`);
  if (existsSync(cached)) return readFile(cached, "utf8");
  const exe = join(bin, component);
  if (!existsSync(exe)) return undefined;
  const text = await new Promise<string>((resolve, reject) => {
    execFile(exe, ["--help"], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      // Some releases print help on stderr; a non-zero exit with text is still help.
      const out = stdout || stderr;
      if (err && !out) reject(new Error(`${exe} --help failed: ${err.message}`));
      else resolve(out);
    });
  });
  await writeFile(cached, text);
  return text;
}

/** The capabilities of one component of a built release (undefined when the release is not built). */
export async function componentCapabilities(
  version: string,
  component: VersionedComponent,
): Promise<ComponentCapabilities | undefined> {
  const text = await helpText(version, component);
  return text === undefined ? undefined : parseHelp(text);
}

/** How an env's requested settings fit a release: what is passed, what is left out and why. */
export interface VersionFit {
  /** The gates passed (those every versioned component of the release knows). */
  featureGates: Record<string, boolean>;
  /** Flags of each component the release lacks (names without dashes): left out of its command line. */
  omittedFlags: Partial<Record<VersionedComponent, string[]>>;
  /** One line per gate or flag left out, for the user. */
  notes: string[];
}

/**
 * Fit requested gates and the flags opkit passes (`argsOf(component)`) to a built release. A gate the release
 * lacks is left out with a note when another supported release knows it; a gate no built release knows is an
 * InvalidEnvOptionError naming `option`.
 */
export async function fitToVersion(
  version: string,
  gates: Record<string, boolean>,
  argsOf: (c: VersionedComponent) => string[],
  option = "--feature-gates",
): Promise<VersionFit> {
  const caps = new Map<VersionedComponent, ComponentCapabilities>();
  for (const c of VERSIONED_COMPONENTS) {
    const k = await componentCapabilities(version, c);
    if (k) caps.set(c, k);
  }
  const notes: string[] = [];
  const featureGates: Record<string, boolean> = {};
  for (const [gate, on] of Object.entries(gates)) {
    const lacking = [...caps].filter(([, k]) => !k.featureGates.has(gate)).map(([c]) => c);
    if (lacking.length === 0) {
      featureGates[gate] = on;
      continue;
    }
    const others: string[] = GATES_OPKIT_USES[gate] ? [`${GATES_OPKIT_USES[gate]}+`] : [];
    for (const v of SUPPORTED_KUBERNETES_VERSIONS) {
      if (v === version) continue;
      if (others.length > 0) break;
      if ((await componentCapabilities(v, "kube-apiserver"))?.featureGates.has(gate)) others.push(v);
    }
    if (others.length === 0) {
      throw new InvalidEnvOptionError(
        option,
        `no built Kubernetes release knows the feature gate ${gate} (${lacking.join(", ")} ${version} do not): check its spelling`,
      );
    }
    notes.push(
      `feature gate ${gate}=${on} left out: ${lacking.join(", ")} ${version} lack it (it exists in ${others.join(", ")})`,
    );
  }
  const omittedFlags: VersionFit["omittedFlags"] = {};
  for (const [c, k] of caps) {
    const missing = argsOf(c)
      .map((a) => /^--([a-z0-9-]+)/.exec(a)?.[1])
      .filter((f): f is string => f !== undefined && f !== "feature-gates" && !k.flags.has(f));
    if (missing.length > 0) {
      omittedFlags[c] = missing;
      notes.push(`${c} ${version} has no ${missing.map((f) => `--${f}`).join(", ")}: left out`);
    }
  }
  return { featureGates, omittedFlags, notes };
}
