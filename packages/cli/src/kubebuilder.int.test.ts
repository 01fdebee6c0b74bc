/**
 * A kubebuilder user's habits on opkit env: a controller for a kind the project does not define
 * (`create api --resource=false --controller`) reconciles under its generated RBAC, which writes nothing
 * to that kind until the controller declares it; `--force` re-scaffolds only what nobody edited; and
 * `deploy --dry-run` leaves nothing behind.
 */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";
import {
  ClusterRoles,
  CustomResourceDefinitions,
  Deployments,
  EventsV1,
  Namespaces,
  type Deployment,
} from "opkit";
import { eventually, operatorProject, useTestEnv, type TestEnv } from "opkit/testenv";

const main = fileURLToPath(new URL("./main.ts", import.meta.url));
const checkout = fileURLToPath(new URL("../../..", import.meta.url));

function opkit(args: string[], cwd: string): { code: number; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, ["--conditions=opkit-source", main, ...args], {
    cwd,
    encoding: "utf8",
    timeout: 300_000,
  });
  return { code: r.status ?? -1, stdout: r.stdout, stderr: r.stderr };
}

/** A new project linked to this checkout (under it, so its imports resolve to this opkit). */
function newProject(work: string, name: string, domain = "my.domain"): string {
  const init = opkit(["init", name, "--link", "--no-install", "--domain", domain], work);
  assert.equal(init.code, 0, init.stderr);
  return join(work, name);
}

type Rule = { apiGroups?: string[]; resources?: string[]; verbs: string[] };
function rulesFor(project: string, group: string, resource: string): Rule[] {
  const rules: Rule[] = [];
  for (const doc of parseAllDocuments(readFileSync(join(project, "config", "rbac.yaml"), "utf8"))) {
    const obj = doc.toJS() as { rules?: Rule[] };
    for (const r of obj.rules ?? [])
      if (r.apiGroups?.includes(group) && r.resources?.includes(resource)) rules.push(r);
  }
  return rules;
}

describe("kubebuilder habits", () => {
  let env: TestEnv;
  let work: string;
  before(async () => {
    env = await useTestEnv();
    // Inside the checkout (.opkit/ is ignored by git): the projects resolve opkit from its node_modules.
    mkdirSync(join(checkout, ".opkit"), { recursive: true });
    work = await mkdtemp(join(checkout, ".opkit", "kubebuilder-"));
  });
  after(async () => {
    await env?.cleanup();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("create api --resource=false --controller: a Deployment controller, no write verb on deployments", async (t) => {
    const project = newProject(work, "deploy-watcher");
    const api = opkit(
      [
        "create",
        "api",
        "--group",
        "apps",
        "--version",
        "v1",
        "--kind",
        "Deployment",
        "--resource=false",
        "--controller",
      ],
      project,
    );
    assert.equal(api.code, 0, api.stderr);
    assert.match(api.stdout, /wrote src\/controllers\/deployment\.ts/);
    assert.equal(opkit(["generate"], project).code, 0);
    const rules = rulesFor(project, "apps", "deployments");
    assert.deepEqual(
      rules.flatMap((r) => r.verbs),
      ["get", "list", "watch"],
    );

    // It reconciles Deployments on the env, as its own process under nothing but that RBAC.
    const p = await operatorProject(env, project);
    t.after(() => p.cleanup());
    await p.start();
    const d = await env.client.create<Deployment>({
      apiVersion: "apps/v1",
      kind: "Deployment",
      metadata: { name: "web", namespace: p.namespace },
      spec: {
        selector: { matchLabels: { app: "web" } },
        template: {
          metadata: { labels: { app: "web" } },
          spec: { containers: [{ name: "web", image: "nginx" }] },
        },
      },
    });
    await eventually("the controller's Event on the Deployment", async () =>
      (await env.client.list(EventsV1, { namespace: p.namespace })).items.find(
        (e) => e.regarding?.uid === d.metadata.uid && e.reason === "Reconciled",
      ),
    );
    await env.client.delete(Deployments, "web", { namespace: p.namespace });

    // Declaring a write is what grants it.
    const file = join(project, "src", "controllers", "deployment.ts");
    writeFileSync(
      file,
      readFileSync(file, "utf8").replace(
        '// .rbac([{ kind: Deployments, verbs: ["patch"] }])',
        '.rbac([{ kind: Deployments, verbs: ["patch"] }])',
      ),
    );
    assert.equal(opkit(["generate"], project).code, 0);
    assert.deepEqual(
      rulesFor(project, "apps", "deployments").flatMap((r) => r.verbs),
      ["get", "list", "watch", "patch"],
    );
  });

  it("--force scaffolds again only files nobody edited, and says which", () => {
    const project = newProject(work, "force-check");
    const args = ["create", "api", "--group", "web", "--version", "v1", "--kind", "Site"];
    assert.equal(opkit(args, project).code, 0);
    const again = opkit(args, project);
    assert.notEqual(again.code, 0);
    assert.match(again.stderr, /src\/api\/v1\/site\.ts exists already: .*--force/);
    // Edited by the user: kept. Untouched: rewritten with the new flags (cluster-scoped now).
    const controller = join(project, "src", "controllers", "site.ts");
    writeFileSync(controller, readFileSync(controller, "utf8") + "\n// mine\n");
    const forced = opkit([...args, "--namespaced=false", "--force"], project);
    assert.equal(forced.code, 0, forced.stderr);
    assert.match(forced.stdout, /kept src\/controllers\/site\.ts: written or edited by you/);
    assert.match(forced.stdout, /--force: rewrote src\/api\/v1\/site\.ts/);
    assert.match(readFileSync(join(project, "src", "api", "v1", "site.ts"), "utf8"), /scope: "Cluster"/);
    assert.match(readFileSync(controller, "utf8"), /\/\/ mine/);
    // Registered once in operator.ts.
    assert.equal(
      readFileSync(join(project, "src", "operator.ts"), "utf8").match(/siteController,/g)?.length,
      1,
    );
  });

  it("deploy --dry-run on a fresh env leaves no Namespace, CRD or RBAC object behind", async () => {
    const domain = `dry${Date.now().toString(36)}.opkit.dev`;
    const project = newProject(work, "dry-op", domain);
    assert.equal(
      opkit(["create", "api", "--group", "kb", "--version", "v1", "--kind", "Widget"], project).code,
      0,
    );
    const dry = opkit(["deploy", "--dry-run", "--kubeconfig", env.kubeconfigPath], project);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, /namespace\/dry-op-system valid \(server dry-run\)/);
    assert.match(
      dry.stdout,
      new RegExp(`customresourcedefinition/widgets\\.kb\\.${domain.replace(/\./g, "\\.")} valid`),
    );
    assert.match(dry.stdout, /clusterrole\/dry-op valid/);
    assert.match(dry.stdout, /deployment\/dry-op not checkable: namespace dry-op-system does not exist yet/);
    assert.equal(await env.client.getOptional(Namespaces, "dry-op-system"), undefined);
    assert.equal(await env.client.getOptional(CustomResourceDefinitions, `widgets.kb.${domain}`), undefined);
    assert.equal(await env.client.getOptional(ClusterRoles, "dry-op"), undefined);
    const strict = opkit(["deploy", "--dry-run", "--strict", "--kubeconfig", env.kubeconfigPath], project);
    assert.notEqual(strict.code, 0);
    assert.match(
      strict.stderr,
      /--strict: \d+ object\(s\) could not be checked.*deployment\/dry-op: namespace dry-op-system/,
    );
    assert.equal(await env.client.getOptional(Namespaces, "dry-op-system"), undefined);
  });
});
