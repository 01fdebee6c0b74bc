/**
 * `opkit build` on a seed operator: the bundle it writes runs as the operator (its own process, under its
 * generated RBAC, on the local control plane), reconciles, and stops cleanly; a project without the entry
 * gets an error naming the file.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Deployments, Services } from "opkit";
import {
  eventually,
  operatorProject,
  readManifests,
  useTestEnv,
  type OperatorProject,
  type TestEnv,
} from "opkit/testenv";
import { BuildError, buildOperator } from "./commands/build.ts";

const cli = fileURLToPath(new URL("./main.ts", import.meta.url));
const appservice = fileURLToPath(new URL("../../../operators/appservice", import.meta.url));
// Inside the project (the bundle resolves node_modules from where it lies) but not its dist/.
const OUT = join(".opkit", "build-test");
const run = promisify(execFile);

describe("opkit build", () => {
  let env: TestEnv;
  let project: OperatorProject;

  before(async () => {
    env = await useTestEnv();
    project = await operatorProject(env, appservice, { namespace: "bundle" });
  });
  after(async () => {
    await project?.cleanup();
    await env?.cleanup();
    await rm(join(appservice, OUT), { recursive: true, force: true });
  });

  it("bundles the operator into a few files that run it: reconciles under its RBAC, stops cleanly", async () => {
    const { stdout } = await run(process.execPath, [
      "--conditions=opkit-source",
      cli,
      "build",
      "--dir",
      appservice,
      "--out-dir",
      OUT,
    ]);
    const written = stdout.trim().split("\n");
    assert.ok(written.includes(`wrote ${join(OUT, "main.js")}`), stdout);
    // The library's lazy parts stay separate chunks (the certificate code is only loaded for webhooks).
    assert.ok(written.length >= 2 && written.length <= 10, `a few files: ${stdout}`);
    const main = await readFile(join(appservice, OUT, "main.js"), "utf8");
    assert.doesNotMatch(main, /from "opkit"|from 'opkit'/, "opkit itself is bundled, not imported");
    // Of the built-in schemas only what the AppService embeds (corev1.ServicePort) is kept: core/v1 has
    // ~200 more, which every start-up would otherwise parse and build.
    assert.match(main, /var ServicePort = /);
    assert.doesNotMatch(main, /var (PodSpec|Node|Deployment|ObjectMeta) = /, "unused schemas are dropped");
    // Node's built-ins are required, not imported as ESM (whose facade loads their lazy parts).
    const chunks = await Promise.all(
      written.map((l) => readFile(join(appservice, l.replace(/^wrote /, "")), "utf8").catch(() => "")),
    );
    for (const js of chunks)
      assert.deepEqual(
        [...js.matchAll(/^import .* from ["'](node:[a-z_/]+)["']/gm)].map((m) => m[1]),
        js.startsWith("import { createRequire") ? ["node:module"] : [],
      );

    const op = await project.start([], { entry: join(OUT, "main.js") });
    for (const obj of await readManifests(join(appservice, "config/samples/example_appservice.yaml"))) {
      obj.metadata.namespace = project.namespace;
      await env.client.apply(obj, { force: true });
    }
    const name = (await readManifests(join(appservice, "config/samples/example_appservice.yaml")))[0]
      ?.metadata.name as string;
    await eventually(
      "the bundled operator created the Deployment and the Service",
      async () =>
        (await env.client.list(Deployments, { namespace: project.namespace })).items.some(
          (d) => d.metadata.name === name,
        ) &&
        (await env.client.list(Services, { namespace: project.namespace })).items.some(
          (s) => s.metadata.name === name,
        ),
      60_000,
    );
    assert.equal(await op.stop(), 0, `the bundle stops cleanly:\n${op.tail()}`);
  });

  it("names the missing entry file", async () => {
    const empty = await mkdtemp(join(tmpdir(), "opkit-build-"));
    try {
      await assert.rejects(buildOperator(empty), (err: unknown) => {
        assert.ok(err instanceof BuildError);
        assert.match(err.message, /no entry file .*src\/main\.ts/);
        return true;
      });
      await assert.rejects(buildOperator(empty, { outDir: ".." }), BuildError);
    } finally {
      await rm(empty, { recursive: true, force: true });
    }
  });
});
