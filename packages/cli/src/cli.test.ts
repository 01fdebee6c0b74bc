/**
 * The command line as a kubebuilder user meets it: help text on every command, option and argument;
 * the project folder named one way (`--dir`, a positional folder only for `init`); `opkit --version`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { buildCommand } from "./commands/build.ts";
import { envCommand } from "./commands/env.ts";
import { crdSizeWarnings, generateCommands, generateProject } from "./commands/generate.ts";
import { operatorCommands } from "./commands/operator.ts";
import { checkBool, createApi, initProject, projectCommands } from "./commands/project.ts";
import { topCommand } from "./commands/top.ts";

function all(cmds: readonly Command[]): Command[] {
  return cmds.flatMap((c) => [c, ...all(c.commands)]);
}
const commands = all([
  ...projectCommands(),
  ...generateCommands(),
  ...operatorCommands(),
  buildCommand(),
  topCommand(),
  envCommand(),
]);
function path(c: Command): string {
  const names: string[] = [];
  for (let x: Command | null = c; x; x = x.parent) names.unshift(x.name());
  return names.join(" ");
}

test("every command, option and argument has help text", () => {
  assert.ok(commands.length > 20);
  const missing: string[] = [];
  for (const c of commands) {
    if (!c.description()) missing.push(path(c));
    for (const o of c.options) if (!o.description) missing.push(`${path(c)} ${o.flags}`);
    for (const a of c.registeredArguments) if (!a.description) missing.push(`${path(c)} <${a.name()}>`);
  }
  assert.deepEqual(missing, []);
});

test("the project folder is --dir everywhere; a positional folder only for init", () => {
  const positional = commands
    .filter((c) => c.registeredArguments.some((a) => a.name() === "dir"))
    .map((c) => path(c));
  assert.deepEqual(positional, ["init"]);
  const withDir = commands.filter((c) => c.options.some((o) => o.long === "--dir")).map((c) => path(c));
  for (const c of ["generate", "deploy", "undeploy", "install", "uninstall", "run", "dev", "build"])
    assert.ok(withDir.includes(c), `${c} takes --dir`);
  assert.ok(withDir.includes("create api") && withDir.includes("create webhook"));
});

test("create webhook takes kubebuilder's flag names and keeps the short forms", () => {
  const webhook = commands.find((c) => path(c) === "create webhook");
  const flags = webhook?.options.map((o) => o.long) ?? [];
  for (const f of [
    "--programmatic-validation",
    "--validation",
    "--defaulting",
    "--conversion",
    "--group",
    "--version",
    "--kind",
  ])
    assert.ok(flags.includes(f), f);
});

test("kubebuilder's boolean flags: --resource, --resource=false", () => {
  assert.equal(checkBool(true), true);
  assert.equal(checkBool("true"), true);
  assert.equal(checkBool("false"), false);
  assert.throws(() => checkBool("no"), /--resource=false/);
});

test("opkit --version prints the CLI and library versions; create api --version stays the API version", () => {
  const main = fileURLToPath(new URL("./main.ts", import.meta.url));
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, "--version"], {
    encoding: "utf8",
  });
  assert.equal(r.status, 0, r.stderr);
  assert.match(r.stdout, /^opkit CLI \d+\.\d+\.\d+\nopkit library \d+\.\d+\.\d+\n$/);
  const api = spawnSync(
    process.execPath,
    ["--conditions=opkit-source", main, "create", "api", "--version", "one", "--kind", "X", "--group", "g"],
    { encoding: "utf8" },
  );
  assert.match(api.stderr, /"one" is not a Kubernetes API version/);
  assert.doesNotMatch(api.stdout, /opkit CLI/);
});

test("create api --resource=false --from-crd: a controller for another project's kind, RBAC read-only", async (t) => {
  const checkout = fileURLToPath(new URL("../../..", import.meta.url));
  mkdirSync(join(checkout, ".opkit"), { recursive: true });
  const work = await mkdtemp(join(checkout, ".opkit", "from-crd-"));
  t.after(() => rm(work, { recursive: true, force: true }));
  const root = await initProject(join(work, "certs-op"), {
    domain: "my.domain",
    link: true,
    install: false,
    onNote: () => {},
  });
  const crd = join(work, "certificates.yaml");
  writeFileSync(
    crd,
    `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: certificates.cert-manager.io
spec:
  group: cert-manager.io
  names: { kind: Certificate, plural: certificates, listKind: CertificateList, singular: certificate }
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: { type: object, properties: { secretName: { type: string } } }
`,
  );
  const notes: string[] = [];
  const opts = {
    group: "cert-manager.io",
    version: "v1",
    kind: "Certificate",
    resource: false,
    fromCrd: crd,
  };
  const files = await createApi(root, { ...opts, onNote: (n) => notes.push(n) });
  assert.deepEqual(files.sort(), [
    "crds/certificates.cert-manager.io.yaml",
    "src/api/external/certificates.cert-manager.io.ts",
    "src/controllers/certificate.ts",
    "test/certificate.int.test.ts",
  ]);
  assert.match(readFileSync(join(root, "src/controllers/certificate.ts"), "utf8"), /\.for\(CertificateV1\)/);
  await generateProject(root, { onWarning: () => {} });
  const rbac = readFileSync(join(root, "config/rbac.yaml"), "utf8");
  assert.match(
    rbac,
    /- cert-manager\.io\n {4}resources:\n {6}- certificates\n {4}verbs:\n {6}- get\n {6}- list\n {6}- watch\n/,
  );
  // Scaffolding it again names the files and the way out.
  await assert.rejects(
    createApi(root, opts),
    /src\/controllers\/certificate\.ts.* exist already: pass --force/,
  );
  // A kind the CRD does not define, or a version it does not serve, is refused naming the flag.
  await assert.rejects(
    createApi(root, { ...opts, kind: "Issuer" }),
    /--from-crd .*no CustomResourceDefinition of kind Issuer/,
  );
  await assert.rejects(
    createApi(root, { ...opts, version: "v2" }),
    /--version v2: the CRD of Certificate serves v1/,
  );
});

test("opkit generate warns about a CRD too large for client-side apply, naming kind, size and the way out", async () => {
  const Type = await import("typebox/type");
  const corev1 = await import("opkit/schemas/core/v1");
  const { defineKind } = await import("opkit");
  const { crdFor } = await import("opkit/generate");
  const kind = (name: string) =>
    defineKind({
      group: "big.example.com",
      version: "v1",
      kind: name,
      spec: Type.Object({ template: corev1.PodTemplateSpec }),
    });
  // Small by default (no built-in descriptions, embedded metadata restricted): no warning.
  assert.deepEqual(crdSizeWarnings([crdFor(kind("Small"))]), []);
  const [warning, ...rest] = crdSizeWarnings([crdFor(kind("Large"), { builtinDescriptions: true })]);
  assert.equal(rest.length, 0);
  assert.match(
    warning ?? "",
    /the CRD of Large \(larges\.big\.example\.com\) is \d+ KiB, more than the 256 KiB/,
  );
  assert.match(warning ?? "", /kubectl apply --server-side/);
});
