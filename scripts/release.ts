/**
 * `make release VERSION=x.y.z`: the release tarballs of every package, never a publish.
 *
 *   node --conditions=opkit-source scripts/release.ts <x.y.z> [--out dist/release]
 *
 * Refuses a dirty work tree and a version the CHANGELOG has already. Sets the version of every package
 * (and the ranges between them), moves the CHANGELOG's Unreleased entries under `## [x.y.z] - <date>`,
 * builds, and packs each package as it is published (without the repository's `opkit-source` export
 * condition, with LICENSE and NOTICE) into dist/release/ with a SHA512SUMS file. The changes are left
 * for the maintainer to review and commit; docs/install.md says how to publish.
 */
import { execFileSync } from "node:child_process";
import { copyFile, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { packPackage, readPackage } from "../packages/cli/src/scaffold/packages.ts";
import { checkTarball, releaseChangelog, setVersions, sha512Line, RELEASE_PACKAGES } from "./release-lib.ts";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { out: { type: "string", default: join("dist", "release") } },
});
const version = positionals[0] ?? "";
const root = join(import.meta.dirname, "..");

function fail(message: string): never {
  process.stderr.write(`make release: ${message}\n`);
  process.exit(1);
}

if (!/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(version))
  fail(`VERSION=${version || "(none)"} is not a semver version: make release VERSION=0.1.0`);
const git = (...args: string[]): string => execFileSync("git", args, { cwd: root, encoding: "utf8" });
const dirty = git("status", "--porcelain").trim();
if (dirty) fail(`the work tree has uncommitted changes; commit or stash them first:\n${dirty}`);

const changelogFile = join(root, "CHANGELOG.md");
const today = new Date().toISOString().slice(0, 10);
const changelog = releaseChangelog(await readFile(changelogFile, "utf8"), version, today);
if (typeof changelog !== "string") fail(changelog.error);

await setVersions(root, version);
await writeFile(changelogFile, changelog);
process.stdout.write(`>> versions set to ${version}; CHANGELOG: ## [${version}] - ${today}\n`);
// The lockfile records the workspace packages' versions.
execFileSync("npm", ["install", "--package-lock-only", "--no-audit", "--no-fund"], {
  cwd: root,
  stdio: "inherit",
});
execFileSync("npx", ["tsc", "-b", "packages/opkit", "packages/cli"], { cwd: root, stdio: "inherit" });

const out = join(root, values.out);
await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });
const sums: string[] = [];
for (const dir of RELEASE_PACKAGES) {
  const pkg = await readPackage(join(root, dir));
  const packed = await packPackage(pkg);
  const target = join(out, packed.filename);
  await copyFile(packed.path, target);
  const problems = checkTarball(target);
  if (problems.length) fail(`${packed.filename}:\n  ${problems.join("\n  ")}`);
  sums.push(await sha512Line(target));
  process.stdout.write(`${target}\n`);
}
await writeFile(join(out, "SHA512SUMS"), `${sums.join("\n")}\n`);
process.stdout.write(
  `>> ${join(values.out, "SHA512SUMS")} written. Review and commit ("Release ${version}"), tag v${version}, then publish the tarballs (docs/install.md).\n`,
);
