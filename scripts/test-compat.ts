/**
 * `make test-compat`: a representative subset of the integration suite (the env itself, the client's
 * negotiation paths, informer faults, the manager, sharding, webhooks, generated CRDs and every seed
 * operator) on each supported Kubernetes release in turn, one shared env per release, then a table of what
 * passed in docs/compatibility.md (between the markers of its "Kubernetes versions" section).
 *
 *   node --conditions=opkit-source scripts/test-compat.ts [--versions 1.34,1.35] [--files a,b] [--no-build] [--no-docs]
 *   node --conditions=opkit-source scripts/test-compat.ts --table-only   # the table from the kept results
 *
 * A release that is not built is built first (about 20 minutes each on 2 cores) unless --no-build, which
 * marks it "not built" in the table instead. Each release's results are kept in
 * `<opkit cache>/compat/<version>.json`, so releases can be run one at a time (`--versions`) and the table
 * still covers every supported release (with the date of each one's last run); `--files` reruns some files
 * and replaces only their results. Exits 1 when any test failed on a release run now.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readFile, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { parseArgs } from "node:util";
import {
  KUBERNETES_VERSION,
  KUBERNETES_VERSION_VARIABLE,
  SUPPORTED_KUBERNETES_VERSIONS,
  TEST_ENV_VARIABLE,
  buildControlPlane,
  cacheDir,
  missingBinaries,
  resolveKubernetesVersion,
} from "opkit/testenv";
import type { CompatRecord } from "./compat-reporter.ts";

const root = join(import.meta.dirname, "..");
const DOC = join(root, "docs", "compatibility.md");
const START = "<!-- test-compat table: written by `make test-compat` -->";
const END = "<!-- end of test-compat table -->";

/** The subset: what depends on the API server's release, not the pure logic the unit tests cover. */
export const COMPAT_SUBSET = [
  "packages/opkit/src/testenv/controlplane.int.test.ts",
  "packages/cli/src/env.int.test.ts",
  "packages/opkit/src/client/client.int.test.ts",
  "packages/opkit/src/client/liststream.int.test.ts",
  "packages/opkit/src/client/protobuf/protobuf.int.test.ts",
  "packages/opkit/src/client/crds.int.test.ts",
  "packages/opkit/src/cache/informer.int.test.ts",
  "packages/opkit/src/manager/manager.int.test.ts",
  "packages/opkit/src/manager/sharded.int.test.ts",
  "packages/opkit/src/sharding/filter.int.test.ts",
  "packages/opkit/src/webhook/webhook.int.test.ts",
  "packages/opkit/src/generate/crd.int.test.ts",
  "packages/opkit/src/migrate/storage.int.test.ts",
  "packages/opkit/src/migrate/upgrade.int.test.ts",
  "operators/acme-namespace/test/acmenamespace.int.test.ts",
  "operators/appservice/test/appservice.int.test.ts",
  "operators/appservice/test/sharding.int.test.ts",
  "operators/jobwatcher/test/jobwatcher.int.test.ts",
  "operators/memcached/test/memcached.int.test.ts",
  "operators/scheduler/test/scheduler.int.test.ts",
  "operators/webapp/test/webapp.int.test.ts",
];

const { values } = parseArgs({
  options: {
    versions: { type: "string" },
    files: { type: "string" },
    "table-only": { type: "boolean", default: false },
    build: { type: "boolean", default: true },
    "no-build": { type: "boolean", default: false },
    docs: { type: "boolean", default: true },
    "no-docs": { type: "boolean", default: false },
  },
});
const versions = values.versions
  ? values.versions.split(",").map((v) => resolveKubernetesVersion(v, "--versions"))
  : [...SUPPORTED_KUBERNETES_VERSIONS];
const build = values.build && !values["no-build"];

interface VersionRun {
  version: string;
  records: CompatRecord[];
  /** Why nothing ran (not built, build failed). */
  absent?: string;
  ms: number;
  /** When it ran (ISO date). */
  date: string;
}

const resultsDir = join(cacheDir(), "compat");
const resultFile = (version: string): string => join(resultsDir, `${version}.json`);

function runSubset(version: string, out: string): Promise<number> {
  const env: NodeJS.ProcessEnv = { ...process.env, [KUBERNETES_VERSION_VARIABLE]: version };
  delete env[TEST_ENV_VARIABLE]; // the global setup starts an env of this release
  const args = [
    "--conditions=opkit-source",
    "--test",
    "--test-global-setup=packages/opkit/src/testenv/global-setup.ts",
    "--test-reporter=spec",
    "--test-reporter-destination=stdout",
    "--test-reporter=./scripts/compat-reporter.ts",
    `--test-reporter-destination=${out}`,
    ...(values.files ? values.files.split(",") : COMPAT_SUBSET),
  ];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: root, env, stdio: "inherit" });
    child.on("error", reject);
    child.on("close", (code) => resolve(code ?? 1));
  });
}

const today = (): string => new Date().toISOString().slice(0, 10);
const runs: VersionRun[] = [];
const dir = await mkdtemp(join(tmpdir(), "opkit-compat-"));
for (const version of values["table-only"] ? [] : versions) {
  const started = Date.now();
  console.log(`\n=== Kubernetes ${version} ===`);
  if (missingBinaries(version).length > 0) {
    if (!build) {
      console.log(`not built: skipped (opkit env build --kubernetes-version ${version})`);
      continue;
    }
    try {
      const r = await buildControlPlane({
        kubernetesVersion: version,
        onProgress: (p) => p.state !== "cached" && console.log(`build ${p.step}: ${p.state}`),
      });
      console.log(`built Kubernetes ${version} in ${(r.elapsedMs / 60_000).toFixed(1)} min`);
    } catch (err) {
      console.error(err instanceof Error ? err.message : String(err));
      runs.push({ version, records: [], absent: "build failed", ms: Date.now() - started, date: today() });
      continue;
    }
  }
  const out = join(dir, `${version}.jsonl`);
  const code = await runSubset(version, out);
  const text = existsSync(out) ? await readFile(out, "utf8") : "";
  const records = text
    .split("\n")
    .filter(Boolean)
    .map((l) => JSON.parse(l) as CompatRecord);
  if (code !== 0 && !records.some((r) => r.outcome === "fail"))
    records.push({ file: "(run)", name: `node --test exited ${code}`, outcome: "fail", ms: 0 });
  let run: VersionRun = { version, records, ms: Date.now() - started, date: today() };
  if (values.files && existsSync(resultFile(version))) {
    // A rerun of some files: their new results replace theirs among the release's last full run.
    const rerun = new Set(values.files.split(",").map((f) => join(root, f)));
    const last = JSON.parse(await readFile(resultFile(version), "utf8")) as VersionRun;
    run = { ...last, records: [...last.records.filter((r) => !rerun.has(r.file)), ...records] };
  }
  runs.push(run);
  await mkdir(resultsDir, { recursive: true });
  await writeFile(resultFile(version), JSON.stringify(run));
}
const failedNow = runs.some(
  (r) => r.records.some((x) => x.outcome === "fail") || r.absent === "build failed",
);

// The table covers every supported release: this run's results, else the last kept ones.
const table: VersionRun[] = [];
for (const version of SUPPORTED_KUBERNETES_VERSIONS) {
  const now = runs.find((r) => r.version === version);
  if (now) table.push(now);
  else if (existsSync(resultFile(version)))
    table.push(JSON.parse(await readFile(resultFile(version), "utf8")) as VersionRun);
  else table.push({ version, records: [], absent: "not run", ms: 0, date: "" });
}

const short = (file: string): string => relative(root, file).replace(/\.int\.test\.ts$/, "");
const files = [...new Set(table.flatMap((r) => r.records.map((x) => short(x.file))))].sort();
const cell = (run: VersionRun, file: string): string => {
  if (run.absent) return run.absent;
  const rs = run.records.filter((r) => short(r.file) === file);
  if (rs.length === 0) return "–";
  const n = (o: CompatRecord["outcome"]): number => rs.filter((r) => r.outcome === o).length;
  const text = `${n("pass")}/${rs.length} pass`;
  return (
    (n("fail") > 0 ? `**${n("fail")} fail**, ` : "") + text + (n("skip") > 0 ? `, ${n("skip")} skipped` : "")
  );
};
const header = `| test file | ${table.map((r) => r.version + (r.version === KUBERNETES_VERSION ? " (default)" : "")).join(" | ")} |`;
const lines = [
  START,
  "",
  header,
  `|---|${table.map(() => "---").join("|")}|`,
  ...files.map((f) => `| \`${f}\` | ${table.map((r) => cell(r, f)).join(" | ")} |`),
  `| **all** | ${table
    .map((r) =>
      r.absent
        ? r.absent
        : `${r.records.filter((x) => x.outcome === "pass").length}/${r.records.length} pass in ${(r.ms / 60_000).toFixed(1)} min (${r.date})`,
    )
    .join(" | ")} |`,
  "",
];
const notes = table.flatMap((r) =>
  r.records
    .filter((x) => x.outcome !== "pass")
    .map(
      (x) =>
        `- ${r.version}, \`${short(x.file)}\` › ${x.name}: ${x.outcome === "skip" ? "skipped" : "**failed**"}${x.reason ? ` — ${x.reason}` : ""}`,
    ),
);
if (notes.length > 0)
  lines.push("Skipped and failed tests, with the reason:", "", ...[...new Set(notes)], "");
lines.push("Written by `make test-compat` (one shared env per release).", "", END);
const text = lines.join("\n");
console.log(`\n${text}`);

if (values.docs && !values["no-docs"]) {
  const doc = existsSync(DOC) ? await readFile(DOC, "utf8") : "";
  const a = doc.indexOf(START);
  const b = doc.indexOf(END);
  if (a >= 0 && b > a) {
    await writeFile(DOC, doc.slice(0, a) + text + doc.slice(b + END.length));
    console.log(`table written to ${relative(root, DOC)}`);
  } else console.log(`${relative(root, DOC)} has no test-compat markers: the table is printed above only`);
}
process.exitCode = failedNow ? 1 : 0;
