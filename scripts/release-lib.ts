/**
 * The pieces of a release that `make release` and the registry test share: which packages are
 * released, setting their versions, the CHANGELOG move, and what every tarball must hold.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";

/** The published packages, in publishing order (a package after the ones it depends on). */
export const RELEASE_PACKAGES = ["packages/opkit", "packages/cli", "packages/create-opkit"] as const;

/** Names of the released packages: their ranges on each other move with the version. */
const NAMES = ["opkit", "@opkit/cli", "create-opkit"];

/** Set every released package's version, and their ranges on each other to `^version`. */
export async function setVersions(root: string, version: string): Promise<void> {
  for (const dir of RELEASE_PACKAGES) {
    const file = join(root, dir, "package.json");
    const manifest = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>;
    manifest.version = version;
    for (const field of ["dependencies", "peerDependencies", "devDependencies"]) {
      const deps = manifest[field] as Record<string, string> | undefined;
      for (const name of NAMES) if (deps?.[name] !== undefined) deps[name] = `^${version}`;
    }
    await writeFile(file, `${JSON.stringify(manifest, null, 2)}\n`);
  }
}

/**
 * The CHANGELOG with its Unreleased entries under `## [version] - date` and an empty Unreleased on top
 * (Keep a Changelog), or why not: no Unreleased section, nothing in it, or the version exists already.
 */
export function releaseChangelog(text: string, version: string, date: string): string | { error: string } {
  if (new RegExp(`^## \\[${version.replace(/\./g, "\\.")}\\]`, "m").test(text))
    return { error: `CHANGELOG.md has a section for ${version} already: pick the next version` };
  const start = /^## \[?Unreleased\]?[ \t]*$/m.exec(text);
  if (!start) return { error: "CHANGELOG.md has no '## Unreleased' section to release" };
  const bodyStart = start.index + start[0].length;
  const next = /^## /m.exec(text.slice(bodyStart));
  const body = text.slice(bodyStart, next ? bodyStart + next.index : undefined);
  if (!/^- /m.test(body)) return { error: "CHANGELOG.md's Unreleased section has no entries to release" };
  return `${text.slice(0, start.index)}## [Unreleased]\n\n## [${version}] - ${date}${body}${next ? text.slice(bodyStart + next.index) : ""}`;
}

/** A line of SHA512SUMS (as `sha512sum` writes it, so `sha512sum -c SHA512SUMS` checks the files). */
export async function sha512Line(file: string): Promise<string> {
  const hex = createHash("sha512")
    .update(await readFile(file))
    .digest("hex");
  return `${hex}  ${basename(file)}`;
}

/** What is wrong with a release tarball: a missing LICENSE, NOTICE or README, local paths, source conditions. */
export function checkTarball(file: string): string[] {
  const files = execFileSync("tar", ["-tzf", file], { encoding: "utf8" }).split("\n");
  const problems: string[] = [];
  for (const f of ["package/LICENSE", "package/NOTICE", "package/README.md", "package/package.json"])
    if (!files.includes(f)) problems.push(`${f} is missing`);
  const manifest = execFileSync("tar", ["-xzOf", file, "package/package.json"], { encoding: "utf8" });
  if (/opkit-source/.test(manifest)) problems.push("package.json keeps the opkit-source export condition");
  const m = JSON.parse(manifest) as Record<string, Record<string, string> | undefined>;
  for (const field of ["dependencies", "peerDependencies", "optionalDependencies"])
    for (const [name, spec] of Object.entries(m[field] ?? {}))
      if (/^(file|link|workspace|git|https?):|^[./]/.test(spec))
        problems.push(`${field}.${name} is ${spec}: only registry versions may be published`);
  return problems;
}
