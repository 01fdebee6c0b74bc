/**
 * `opkit api freeze` / `opkit api check` on a scaffolded project: the released API is frozen, a compatible
 * change passes, a breaking one fails naming the version and field (the command exits 1), and a break
 * recorded with its reason passes as intended. Runs the CLI as a user does; no control plane needed.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import { checkApi, freezeApi } from "./commands/api.ts";
import { createApi, initProject } from "./commands/project.ts";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));

function opkit(args: string[]): { code: number; out: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    encoding: "utf8",
    timeout: 120_000,
  });
  return { code: r.status ?? -1, out: r.stdout + r.stderr };
}

/**
 * A scaffolded project with one kind, Cart (shop.example.com/v1), inside the checkout so that it resolves
 * opkit from the workspace; removed after the test.
 */
async function cartProject(t: TestContext): Promise<string> {
  const checkout = fileURLToPath(new URL("../../..", import.meta.url));
  mkdirSync(join(checkout, ".opkit"), { recursive: true });
  const work = await mkdtemp(join(checkout, ".opkit", "api-"));
  t.after(() => rm(work, { recursive: true, force: true }));
  const root = await initProject(join(work, "shop"), {
    domain: "example.com",
    link: true,
    install: false,
    onNote: () => {},
  });
  await createApi(root, { group: "shop", version: "v1", kind: "Cart", onNote: () => {} });
  return root;
}

test("api freeze, then check: compatible changes pass, breaking ones fail with their path, intended ones pass", async (t) => {
  const root = await cartProject(t);
  const kindFile = join(root, "src", "api", "v1", "cart.ts");
  const original = readFileSync(kindFile, "utf8");

  assert.equal(await checkApi(root), undefined, "nothing released yet");
  assert.deepEqual(await freezeApi(root), [
    join("config", "crds", "released", "carts.shop.example.com.yaml"),
  ]);
  assert.ok(existsSync(join(root, "config", "crds", "released", "carts.shop.example.com.yaml")));
  assert.deepEqual((await checkApi(root))?.findings, [], "the frozen API is compatible with itself");

  const generated = opkit(["generate", "--dir", root]);
  assert.equal(generated.code, 0, generated.out);
  assert.ok(
    existsSync(join(root, "config", "crds", "released", "carts.shop.example.com.yaml")),
    "generate keeps the snapshot",
  );
  const clean = opkit(["generate", "--check", "--dir", root]);
  assert.equal(clean.code, 0, clean.out);
  assert.match(clean.out, /compatible with the released one/);

  // Each check runs in its own process, as a user's does (a process imports the definition once).
  // Additive: a new optional field.
  writeFileSync(
    kindFile,
    original.replace(
      "  spec: Type.Object({\n",
      "  spec: Type.Object({\n    note: Type.Optional(Type.String()),\n",
    ),
  );
  const additive = opkit(["api", "check", "--dir", root]);
  assert.equal(additive.code, 0, additive.out);
  assert.match(additive.out, /compatible with the released one/);

  // Breaking: size tightened and a new required field without a default.
  writeFileSync(
    kindFile,
    original
      .replace("maximum: 100", "maximum: 10")
      .replace("  spec: Type.Object({\n", "  spec: Type.Object({\n    owner: Type.String(),\n"),
  );
  const cli = opkit(["api", "check", "--dir", root, "--min-kubernetes-version", "1.34"]);
  assert.equal(cli.code, 1, cli.out);
  assert.match(cli.out, /carts\.shop\.example\.com v1 \.spec\.owner: required-added/);
  assert.match(
    cli.out,
    /carts\.shop\.example\.com v1 \.spec\.size: bound-tightened: maximum went from 100 to 10.*ratchets this check/,
  );
  assert.match(cli.out, /breaking-changes\.yaml/, "says how to record an intended break");
  const generateCheck = opkit(["generate", "--check", "--dir", root]);
  assert.equal(generateCheck.code, 1, "generate --check fails too (here first on the stale generated files)");

  // Intended: recorded with a reason, the check passes and lists them.
  writeFileSync(
    join(root, "config", "crds", "released", "breaking-changes.yaml"),
    `- crd: carts.shop.example.com\n  rule: required-added\n  path: .spec.owner\n  reason: every cart has an owner from 0.2 on\n` +
      `- crd: carts.shop.example.com\n  rule: bound-tightened\n  reason: carts above 10 never worked\n`,
  );
  const intended = opkit(["api", "check", "--dir", root]);
  assert.equal(intended.code, 0, intended.out);
  assert.match(intended.out, /intended: .*\.spec\.owner: required-added.*every cart has an owner/);
});

test("migrateStorage on the operator: the generated RBAC grants what the migration needs, by name", async (t) => {
  const root = await cartProject(t);
  const operatorFile = join(root, "src", "operator.ts");
  const rbacOf = () => {
    const r = opkit(["generate", "--dir", root]);
    assert.equal(r.code, 0, r.out);
    return readFileSync(join(root, "config", "rbac.yaml"), "utf8");
  };
  assert.doesNotMatch(
    rbacOf(),
    /customresourcedefinitions/,
    "no apiextensions access without migrateStorage",
  );
  writeFileSync(
    operatorFile,
    readFileSync(operatorFile, "utf8").replace(
      '  domain: "example.com",',
      '  domain: "example.com",\n  migrateStorage: true,',
    ),
  );
  const rbac = parseAllDocuments(rbacOf()).map(
    (d) =>
      d.toJS() as {
        kind: string;
        rules?: { apiGroups: string[]; resources: string[]; resourceNames?: string[]; verbs: string[] }[];
      },
  );
  const rules = rbac.flatMap((d) => d.rules ?? []);
  const rule = (resource: string) => rules.find((r) => r.resources.includes(resource));
  assert.deepEqual(rule("customresourcedefinitions/status")?.resourceNames, ["carts.shop.example.com"]);
  assert.deepEqual(rule("customresourcedefinitions/status")?.verbs, ["patch"]);
  assert.deepEqual(rule("customresourcedefinitions")?.resourceNames, ["carts.shop.example.com"]);
  assert.deepEqual(rule("customresourcedefinitions")?.verbs, ["get"]);
  assert.ok(
    rules.some(
      (r) => r.resources.includes("carts") && r.verbs.includes("update") && r.verbs.includes("list"),
    ),
  );
  assert.ok(rule("storageversionmigrations"));
});
