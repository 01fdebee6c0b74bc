/**
 * make release's CHANGELOG move and tarball checks, on made-up changelogs and tarballs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { checkTarball, releaseChangelog, setVersions } from "./release-lib.ts";

const changelog = `# Changelog

Intro.

## [Unreleased]

### Added

- A thing.

### Fixed

- Another.

## [0.1.0] - 2026-11-01

### Added

- The first.
`;

test("the Unreleased entries move under the version, an empty Unreleased stays on top", () => {
  const out = releaseChangelog(changelog, "0.2.0", "2026-12-01");
  assert.equal(typeof out, "string");
  assert.equal(out, changelog.replace("## [Unreleased]\n", "## [Unreleased]\n\n## [0.2.0] - 2026-12-01\n"));
  // The result releases again only with new entries.
  assert.deepEqual(releaseChangelog(out, "0.3.0", "2026-12-02"), {
    error: "CHANGELOG.md's Unreleased section has no entries to release",
  });
});

test("a version the CHANGELOG has, or no Unreleased section, is refused", () => {
  assert.deepEqual(releaseChangelog(changelog, "0.1.0", "2026-12-01"), {
    error: "CHANGELOG.md has a section for 0.1.0 already: pick the next version",
  });
  assert.deepEqual(releaseChangelog("# Changelog\n\n## [0.1.0] - x\n\n- a\n", "0.2.0", "d"), {
    error: "CHANGELOG.md has no '## Unreleased' section to release",
  });
});

test("setVersions moves every package and the ranges between them", async (t) => {
  const root = await mkdtemp(join(tmpdir(), "opkit-release-lib-"));
  t.after(() => rm(root, { recursive: true, force: true }));
  const write = async (dir: string, manifest: unknown) => {
    await mkdir(join(root, dir), { recursive: true });
    await writeFile(join(root, dir, "package.json"), JSON.stringify(manifest));
  };
  await write("packages/opkit", { name: "opkit", version: "0.1.0", dependencies: { undici: "^8.0.0" } });
  await write("packages/cli", {
    name: "@opkit/cli",
    version: "0.1.0",
    peerDependencies: { opkit: "^0.1.0" },
  });
  await write("packages/create-opkit", {
    name: "create-opkit",
    version: "0.1.0",
    dependencies: { "@opkit/cli": "^0.1.0", opkit: "^0.1.0" },
  });
  await setVersions(root, "1.2.3");
  const read = async (dir: string) =>
    JSON.parse(await readFile(join(root, dir, "package.json"), "utf8")) as Record<string, unknown>;
  assert.deepEqual(await read("packages/opkit"), {
    name: "opkit",
    version: "1.2.3",
    dependencies: { undici: "^8.0.0" },
  });
  assert.deepEqual((await read("packages/cli")).peerDependencies, { opkit: "^1.2.3" });
  assert.deepEqual((await read("packages/create-opkit")).dependencies, {
    "@opkit/cli": "^1.2.3",
    opkit: "^1.2.3",
  });
});

test("checkTarball names what a release tarball lacks or must not carry", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-release-tgz-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, "package"));
  await writeFile(
    join(dir, "package", "package.json"),
    JSON.stringify({
      name: "x",
      exports: { ".": { "opkit-source": "./src/index.ts", default: "./dist/index.js" } },
      dependencies: { opkit: "file:../opkit", ok: "^1.0.0" },
      peerDependencies: { other: "workspace:*" },
    }),
  );
  await writeFile(join(dir, "package", "README.md"), "# x\n");
  execFileSync("tar", ["-czf", join(dir, "x.tgz"), "-C", dir, "package"]);
  assert.deepEqual(checkTarball(join(dir, "x.tgz")), [
    "package/LICENSE is missing",
    "package/NOTICE is missing",
    "package.json keeps the opkit-source export condition",
    "dependencies.opkit is file:../opkit: only registry versions may be published",
    "peerDependencies.other is workspace:*: only registry versions may be published",
  ]);
});
