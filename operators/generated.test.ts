/**
 * Every seed operator's checked-in config/ (CRDs, RBAC, manifests), chart/ and Dockerfile are exactly
 * what `opkit generate` makes of its src/operator.ts now: the operators' tests install those very CRDs
 * and run under that very RBAC, so a stale file would test something other than what ships. One check
 * for all of them, through the CLI users run in CI (`opkit generate --check`), which also compares each
 * operator's CRDs with its released API (config/crds/released/, written by `opkit api freeze`).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseAllDocuments } from "yaml";

const operators = fileURLToPath(new URL(".", import.meta.url));
const cli = join(
  dirname(createRequire(import.meta.url).resolve("@opkit/cli/package.json")),
  "bin",
  "opkit.js",
);
const projects = readdirSync(operators, { withFileTypes: true })
  .filter((d) => d.isDirectory() && existsSync(join(operators, d.name, "src", "operator.ts")))
  .map((d) => d.name);

test("every seed operator is here", () => {
  assert.deepEqual(projects.sort(), [
    "acme-namespace",
    "appservice",
    "jobwatcher",
    "memcached",
    "scheduler",
    "webapp",
  ]);
});

for (const name of projects)
  test(`${name}: the generated files are up to date`, () => {
    const r = spawnSync(
      process.execPath,
      ["--conditions=opkit-source", cli, "generate", "--check", "--dir", join(operators, name)],
      { encoding: "utf8", timeout: 120_000 },
    );
    assert.equal(r.status, 0, `${r.stderr}(in operators/${name})`);
    // An operator with kinds of its own has released them; one without (the scheduler) has nothing to compare.
    const released = existsSync(join(operators, name, "config", "crds", "released"));
    assert.equal(
      r.stdout.trim(),
      `up to date: nothing would change\n${
        released
          ? "the API is compatible with the released one (config/crds/released)"
          : "no released API to compare with (config/crds/released): run `opkit api freeze` when you release"
      }`,
    );
  });

/**
 * The kinds each seed operator's code writes (group/resource), read from its source: its children
 * (`reconcileChildren`), its own kinds' status and finalizers, Events, the Lease of leader election,
 * and what it writes by hand (declared in `rbac([...])` or `extraRules`). The generated RBAC may grant a
 * write verb on these and on nothing else.
 */
const WRITTEN: Record<string, readonly string[]> = {
  "acme-namespace": [
    "/events",
    "events.k8s.io/events",
    "coordination.k8s.io/leases",
    "tenancy.acme.com/acmenamespaces",
    "/limitranges",
    "/resourcequotas",
    "networking.k8s.io/networkpolicies",
    "rbac.authorization.k8s.io/rolebindings",
    // Created and labelled by hand; bound to the built-in `admin` role by its RoleBinding.
    "/namespaces",
    "rbac.authorization.k8s.io/clusterroles",
  ],
  appservice: [
    "/events",
    "events.k8s.io/events",
    "coordination.k8s.io/leases",
    "kosmos.io/appservices",
    "apps/deployments",
    "/services",
  ],
  jobwatcher: [
    "/events",
    "events.k8s.io/events",
    "coordination.k8s.io/leases",
    "batch.my.github.com/jobwatchers",
    "batch.my.github.com/clusterjobwatchers",
    // Deleted when their watcher's TTL is over; never otherwise written.
    "batch/jobs",
  ],
  memcached: [
    "/events",
    "events.k8s.io/events",
    "coordination.k8s.io/leases",
    "cache.example.com/memcacheds",
    "apps/deployments",
  ],
  // Binds pods and sets their PodScheduled condition: the binding and status subresources only.
  scheduler: ["/events", "events.k8s.io/events", "coordination.k8s.io/leases", "/pods"],
  webapp: [
    "/events",
    "events.k8s.io/events",
    "coordination.k8s.io/leases",
    "workloads.apps.acme.com/webapps",
    "/configmaps",
    "/secrets",
    "/services",
    "apps/deployments",
    "apps/statefulsets",
    "networking.k8s.io/ingresses",
    // Adopted claims get the WebApp as an owner (a patch).
    "/persistentvolumeclaims",
  ],
};

const READ_VERBS = new Set(["get", "list", "watch"]);

for (const name of projects)
  test(`${name}: its RBAC grants no write verb on a kind it never writes`, () => {
    const written = new Set(WRITTEN[name] ?? []);
    const granted: string[] = [];
    for (const doc of parseAllDocuments(readFileSync(join(operators, name, "config", "rbac.yaml"), "utf8"))) {
      const obj = doc.toJS() as { rules?: { apiGroups?: string[]; resources?: string[]; verbs: string[] }[] };
      for (const rule of obj.rules ?? []) {
        const writes = rule.verbs.filter((v) => !READ_VERBS.has(v));
        if (writes.length === 0) continue;
        for (const group of rule.apiGroups ?? [])
          for (const resource of rule.resources ?? [])
            granted.push(`${group}/${resource.split("/")[0] ?? ""} (${writes.join(", ")} on ${resource})`);
      }
    }
    assert.ok(granted.length > 0, `no write grant found in operators/${name}/config/rbac.yaml`);
    const extra = granted.filter((g) => !written.has(g.split(" ")[0] ?? ""));
    assert.deepEqual(extra, [], `operators/${name} is granted writes its code never makes`);
  });
