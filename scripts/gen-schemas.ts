/**
 * `make schemas`: regenerate the built-in API types (packages/opkit/src/api/schemas/ and
 * packages/opkit/src/client/models/) from the OpenAPI v3 of the kube-apiserver `opkit env` runs.
 *
 *   node --conditions=opkit-source scripts/gen-schemas.ts [--name <env>] [--check]
 *
 * Uses the running env named by `--name` or $OPKIT_TEST_ENV; otherwise starts a private one (no nodes)
 * and stops it at the end. `--check` writes nothing and exits 1 when the committed files differ.
 */
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import { parseArgs } from "node:util";
import { builtinSchemaFiles, fetchBuiltinOpenApi, MODELS_DIR, SCHEMAS_DIR } from "opkit/generate";
import { ControlPlane, startOwnedEnv, TEST_ENV_VARIABLE } from "opkit/testenv";

const { values } = parseArgs({
  options: { name: { type: "string" }, check: { type: "boolean", default: false } },
});
const src = join(import.meta.dirname, "..", "packages", "opkit", "src");

async function listFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true }).catch(() => []);
  return entries.filter((e) => e.isFile()).map((e) => relative(src, join(e.parentPath, e.name)));
}

const name = values.name ?? process.env[TEST_ENV_VARIABLE];
let cp: ControlPlane;
let owned = false;
if (name) {
  cp = new ControlPlane(name);
  if (!(await cp.isRunning())) {
    console.error(
      `env "${name}" is not running: start it with \`opkit env up --name ${name}\` or omit --name`,
    );
    process.exit(2);
  }
} else {
  console.log("starting a private env to read the OpenAPI from (no nodes)");
  cp = await startOwnedEnv(`schemas-${process.pid}`, 0);
  owned = true;
}

let exitCode = 0;
try {
  const client = await cp.client({ fieldManager: "opkit-gen-schemas" });
  const { kubernetesVersion, documents } = await fetchBuiltinOpenApi(client);
  await client.close();
  const files = builtinSchemaFiles(documents, { kubernetesVersion });
  const existing = [
    ...(await listFiles(join(src, SCHEMAS_DIR))),
    ...(await listFiles(join(src, MODELS_DIR))),
  ];
  const stale = existing.filter((f) => !files.has(f));
  const changed: string[] = [];
  for (const [path, content] of files) {
    const current = await readFile(join(src, path), "utf8").catch(() => undefined);
    if (current !== content) changed.push(path);
  }
  if (values.check) {
    if (changed.length > 0 || stale.length > 0) {
      console.error(
        `the generated schemas are out of step with kube-apiserver ${kubernetesVersion}: ` +
          `${changed.length} to rewrite (${changed.slice(0, 5).join(", ")}${changed.length > 5 ? ", ..." : ""}), ` +
          `${stale.length} to delete; run \`make schemas\``,
      );
      exitCode = 1;
    } else console.log(`${files.size} generated files match kube-apiserver ${kubernetesVersion}`);
  } else {
    for (const path of changed) {
      await mkdir(dirname(join(src, path)), { recursive: true });
      await writeFile(join(src, path), files.get(path) as string);
    }
    for (const path of stale) await rm(join(src, path));
    console.log(
      `kube-apiserver ${kubernetesVersion}: ${files.size} files, ${changed.length} written, ${stale.length} deleted`,
    );
  }
} finally {
  if (owned) await cp.down();
}
process.exit(exitCode);
