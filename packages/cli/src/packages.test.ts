/**
 * How `opkit init` wires opkit in: the packed tarballs are complete (built JavaScript, types, README,
 * no tests) and cached; the registry is used only when it serves the very same tarballs; otherwise the
 * tarballs are vendored; `--link` links a checkout; a checkout that is not built is refused. The real
 * `npm pack` of this checkout; a fake registry lookup.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, mkdir, readdir, rm, stat, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  PackagingError,
  assertBuilt,
  checkoutOf,
  localPackages,
  packPackage,
  wireDependencies,
  type RegistryLookup,
} from "./scaffold/packages.ts";

function tarList(file: string): string[] {
  const r = spawnSync("tar", ["-tzf", file], { encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.split("\n").filter(Boolean);
}

test("npm pack gives complete tarballs: JavaScript, types, README, LICENSE and NOTICE; no tests or test data", async () => {
  const pkgs = await localPackages();
  assert.equal(pkgs.opkit.name, "opkit");
  assert.equal(pkgs.cli.name, "@opkit/cli");
  assert.ok(checkoutOf(pkgs), "these tests run from a checkout");
  const lib = tarList((await packPackage(pkgs.opkit)).path);
  for (const f of [
    "package/package.json",
    "package/README.md",
    "package/LICENSE",
    "package/NOTICE",
    "package/dist/index.js",
    "package/dist/index.d.ts",
    "package/dist/testenv/index.js",
    "package/dist/testenv/index.d.ts",
    "package/dist/testenv/watchdog.js",
    "package/dist/generate/index.js",
    "package/dist/generate/index.d.ts",
  ]) {
    assert.ok(lib.includes(f), `${f} in the opkit tarball`);
  }
  assert.deepEqual(
    lib.filter((f) => /\.test\.|testdata|tsbuildinfo/.test(f)),
    [],
    "no tests in the opkit tarball",
  );
  const manifest = spawnSync("tar", ["-xzOf", (await packPackage(pkgs.opkit)).path, "package/package.json"], {
    encoding: "utf8",
  }).stdout;
  assert.doesNotMatch(
    manifest,
    /opkit-source/,
    "the source condition is this repository's, not the tarball's",
  );
  assert.deepEqual((JSON.parse(manifest) as { exports: Record<string, unknown> }).exports["."], {
    types: "./dist/index.d.ts",
    default: "./dist/index.js",
  });
  const cli = tarList((await packPackage(pkgs.cli)).path);
  for (const f of [
    "package/bin/opkit.js",
    "package/dist/main.js",
    "package/dist/doctor-main.js",
    "package/README.md",
    "package/LICENSE",
    "package/NOTICE",
    "package/package.json",
  ]) {
    assert.ok(cli.includes(f), `${f} in the CLI tarball`);
  }
  assert.deepEqual(
    cli.filter((f) => /\.test\.|testdata|testing\//.test(f)),
    [],
    "no tests in the CLI tarball",
  );
});

test("packing is cached by content: a second pack reuses the tarball", async () => {
  const { opkit } = await localPackages();
  const first = await packPackage(opkit);
  const mtime = (await stat(first.path)).mtimeMs;
  const started = Date.now();
  const second = await packPackage(opkit);
  assert.equal(second.path, first.path);
  assert.equal(second.integrity, first.integrity);
  assert.equal((await stat(second.path)).mtimeMs, mtime, "not packed again");
  assert.ok(Date.now() - started < 2000, `cache hit took ${Date.now() - started} ms`);
  assert.match(first.integrity, /^sha512-[A-Za-z0-9+/]+=*$/);
});

test("registry: the same tarballs → a version range; another package of that name → vendored", async (t) => {
  const pkgs = await localPackages();
  const packed = { opkit: await packPackage(pkgs.opkit), cli: await packPackage(pkgs.cli) };
  const asked: string[] = [];
  const registry =
    (answers: Record<string, { integrity?: string; absent?: boolean; error?: string }>): RegistryLookup =>
    async (name, version) => {
      asked.push(`${name}@${version}`);
      return answers[name] ?? { absent: true };
    };
  const dirs: string[] = [];
  t.after(() => Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true }))));
  const fresh = async (): Promise<string> => {
    const d = await mkdtemp(join(tmpdir(), "opkit-wire-"));
    dirs.push(d);
    return d;
  };

  const same = await fresh();
  const published = await wireDependencies(same, {
    lookup: registry({
      opkit: { integrity: packed.opkit.integrity },
      "@opkit/cli": { integrity: packed.cli.integrity },
    }),
  });
  assert.deepEqual([published.opkit, published.cli], [`^${pkgs.opkit.version}`, `^${pkgs.cli.version}`]);
  assert.ok(!existsSync(join(same, "vendor")), "nothing vendored");
  assert.deepEqual(asked, [`opkit@${pkgs.opkit.version}`, `@opkit/cli@${pkgs.cli.version}`]);

  // An unrelated package called opkit (different tarball): vendor, and say why.
  const other = await fresh();
  const vendored = await wireDependencies(other, {
    lookup: registry({ opkit: { integrity: "sha512-c29tZXRoaW5nIGVsc2U=" }, "@opkit/cli": { absent: true } }),
  });
  assert.equal(vendored.opkit, `file:vendor/opkit-${pkgs.opkit.version}.tgz`);
  assert.equal(vendored.cli, `file:vendor/opkit-cli-${pkgs.cli.version}.tgz`);
  assert.deepEqual(
    (await readdir(join(other, "vendor"))).sort(),
    [packed.cli.filename, packed.opkit.filename].sort(),
  );
  assert.match(
    vendored.notes.join("\n"),
    /the registry's opkit@[\d.]+ is not this build \(its integrity sha512-c29tZXRoaW5nIGVsc2U=, this build's sha512-/,
  );
  assert.match(vendored.notes.join("\n"), /the registry has no @opkit\/cli@/);

  // Only one of the two published is not enough: the CLI pins the library's version.
  const half = await wireDependencies(await fresh(), {
    lookup: registry({ opkit: { integrity: packed.opkit.integrity } }),
  });
  assert.match(half.opkit, /^file:vendor\//);

  const offline = await wireDependencies(await fresh(), {
    lookup: registry({ opkit: { error: "ETIMEDOUT" } }),
  });
  assert.match(offline.notes.join("\n"), /could not ask the registry about opkit@[\d.]+: ETIMEDOUT/);

  asked.length = 0;
  const forced = await wireDependencies(await fresh(), { vendor: true, lookup: registry({}) });
  assert.match(forced.opkit, /^file:vendor\//);
  assert.deepEqual(asked, [], "--vendor does not ask the registry");
});

test("--link: file: links to this checkout or a given one; a non-checkout is refused", async () => {
  const pkgs = await localPackages();
  const root = checkoutOf(pkgs)!;
  const linked = await wireDependencies(await mkdtemp(join(tmpdir(), "opkit-wire-")), { link: true });
  assert.deepEqual([linked.opkit, linked.cli], [`file:${root}/packages/opkit`, `file:${root}/packages/cli`]);
  await assert.rejects(
    wireDependencies(tmpdir(), { link: tmpdir() }),
    (err: unknown) =>
      err instanceof PackagingError &&
      /--link \/tmp: .*package\.json is missing; pass the root of an opkit checkout/.test(err.message),
  );
});

test("a checkout whose dist/ does not match src/ is refused, with the command that fixes it", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-built-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const pkg = { name: "fake", version: "1.0.0", dir };
  await writeFile(join(dir, "tsconfig.json"), "{}");
  await mkdir(join(dir, "src"));
  await mkdir(join(dir, "dist"));
  await writeFile(join(dir, "src", "a.ts"), "export {};\n");
  await assert.rejects(assertBuilt(pkg), /fake at .* is not built: build it first: make build/);
  await writeFile(join(dir, "dist", "a.js"), "export {};\n");
  await writeFile(join(dir, "tsconfig.tsbuildinfo"), "{}");
  const past = new Date(Date.now() - 60_000);
  await utimes(join(dir, "tsconfig.tsbuildinfo"), past, past);
  await assert.rejects(assertBuilt(pkg), /fake: src\/a\.ts changed after the last build/);
  await utimes(join(dir, "tsconfig.tsbuildinfo"), new Date(), new Date());
  await assertBuilt(pkg);
  await writeFile(join(dir, "dist", "gone.js"), "export {};\n");
  await assert.rejects(
    assertBuilt(pkg),
    /fake: dist\/gone\.js has no source any more and would be packed: rm -rf/,
  );
  // An installed copy (no tsconfig.json) ships built.
  await rm(join(dir, "tsconfig.json"));
  await assertBuilt(pkg);
});
