/**
 * The files `opkit init` and `opkit create api` write. Generated projects run TypeScript directly on
 * Node 24 (type stripping), so there is no build step between editing and running.
 */

export interface ProjectVars {
  name: string;
  domain: string;
  opkitSpec: string;
  cliSpec: string;
}

export interface KindVars {
  group: string; // short group, e.g. "cache"
  fullGroup: string; // "cache.example.com"
  version: string;
  kind: string;
  lower: string; // "memcached"
  plural: string;
  clusterScoped: boolean;
}

export const SCAFFOLD_IMPORTS = "// +opkit:scaffold:imports";
export const SCAFFOLD_KINDS = "// +opkit:scaffold:kinds";
export const SCAFFOLD_CONTROLLERS = "// +opkit:scaffold:controllers";

export function packageJson(v: ProjectVars): string {
  return (
    JSON.stringify(
      {
        name: v.name,
        version: "0.1.0",
        private: true,
        type: "module",
        engines: { node: ">=22.19" },
        scripts: {
          start: "node src/main.ts",
          typecheck: "tsc --noEmit",
          test: "node --test --test-concurrency=1 'test/**/*.test.ts'",
          generate: "opkit generate",
        },
        dependencies: { opkit: v.opkitSpec, typebox: "1.4.3" },
        devDependencies: { "@opkit/cli": v.cliSpec, typescript: "5.9.3", "@types/node": "24.19.2" },
      },
      null,
      2,
    ) + "\n"
  );
}

export const tsconfig = `{
  "compilerOptions": {
    "target": "es2023",
    "module": "nodenext",
    "moduleResolution": "nodenext",
    "strict": true,
    "noEmit": true,
    "allowImportingTsExtensions": true,
    "erasableSyntaxOnly": true,
    "verbatimModuleSyntax": true,
    "skipLibCheck": true,
    "types": ["node"]
  },
  "include": ["src", "test"]
}
`;

export const gitignore = "node_modules/\n";

export function operatorTs(v: ProjectVars): string {
  return `/**
 * The operator's single description of itself: opkit generate derives CRDs, RBAC and manifests from it,
 * and src/main.ts runs it. \`opkit create api\` adds kinds and controllers at the markers below.
 */
import { defineOperator } from "opkit";
${SCAFFOLD_IMPORTS}

export default defineOperator({
  name: "${v.name}",
  domain: "${v.domain}",
  kinds: [
    ${SCAFFOLD_KINDS}
  ],
  controllers: [
    ${SCAFFOLD_CONTROLLERS}
  ],
});
`;
}

export const mainTs = `/** Entry point: runs the operator until SIGTERM (settings come from the environment; see runOperator). */
import { runOperator } from "opkit";
import operator from "./operator.ts";

await runOperator(operator);
`;

export function readme(v: ProjectVars): string {
  return `# ${v.name}

A Kubernetes operator written with [opkit](https://github.com/opkit).

- \`npx opkit create api --group <g> --version v1alpha1 --kind <Kind>\` — add a kind and its controller
- \`npx opkit generate\` — CRDs, RBAC, manifests, Helm chart into \`config/\`
- \`npm test\` — tests against a real local control plane (\`opkit env\`)
- \`npx opkit run --install-crds\` — run against the current kubeconfig
- \`npx opkit generate crd src/api/<version>/<kind>.ts\` — print one kind's CRD

When \`vendor/\` exists it holds the opkit packages this project installs (\`file:vendor/….tgz\` in
package.json): opkit is not in the npm registry yet. Commit it; \`npm ci\` and the Dockerfile use it.
`;
}

export function kindTs(k: KindVars): string {
  return `/** ${k.kind}: the ${k.fullGroup}/${k.version} API, defined once — types, validation and the CRD come from here. */
import { Type } from "typebox";
import { conditions, defineKind, type ObjectOf } from "opkit";

export const ${k.kind} = defineKind({
  group: "${k.fullGroup}",
  version: "${k.version}",
  kind: "${k.kind}",
  plural: "${k.plural}",
  scope: "${k.clusterScoped ? "Cluster" : "Namespaced"}",
  description: "${k.kind} is the Schema for the ${k.plural} API.",
  spec: Type.Object({
    size: Type.Integer({ minimum: 1, maximum: 100, default: 1, description: "How many instances to run." }),
  }),
  status: Type.Object({
    observedGeneration: Type.Optional(Type.Integer({ description: "The generation the status describes." })),
    conditions: Type.Optional(conditions()),
  }),
  printerColumns: [
    { name: "Size", type: "integer", jsonPath: ".spec.size" },
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
  ],
});

export type ${k.kind}Object = ObjectOf<typeof ${k.kind}>;
`;
}

export function controllerTs(k: KindVars): string {
  return `/** The ${k.kind} controller: makes the cluster match each ${k.kind}'s spec and reports it in status. */
import { controller, generationChanged, manageError, manageSuccess, requeueAfter, RetryTracker } from "opkit";
import { ${k.kind} } from "../api/${k.version}/${k.lower}.ts";

export function ${k.lower}Controller() {
  const retries = new RetryTracker();
  return controller("${k.lower}")
    .for(${k.kind}, { predicates: [generationChanged()] })
    .reconcile(async (req, ctx) => {
      const obj = ctx.cache.get(${k.kind}, req.name, { namespace: req.namespace });
      if (!obj) return; // deleted: owned children go with it (garbage collection)
      const manage = { client: ctx.client, recorder: ctx.recorder, retries };
      try {
        // Make the world match obj.spec here: applyOwned(...) or reconcileChildren(...).
        ctx.log.info({ size: obj.spec.size }, "reconciling");
        await manageSuccess(manage, obj);
      } catch (err) {
        // A status condition, a Warning Event, and a retry that backs off (capped at 6 h).
        return requeueAfter(await manageError(manage, obj, err));
      }
    });
}
`;
}

export function sampleYaml(k: KindVars): string {
  return `apiVersion: ${k.fullGroup}/${k.version}
kind: ${k.kind}
metadata:
  name: ${k.lower}-sample
spec:
  size: 2
`;
}

export function kindTestTs(k: KindVars): string {
  const ns = k.clusterScoped ? "" : ", { namespace: ns }";
  return `/** ${k.kind} against a real local control plane (opkit env): the sample becomes Ready. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { Manager, getCondition } from "opkit";
import { crdFor } from "opkit/generate";
import { eventually, useTestEnv } from "opkit/testenv";
import { ${k.kind} } from "../src/api/${k.version}/${k.lower}.ts";
import { ${k.lower}Controller } from "../src/controllers/${k.lower}.ts";

test("a ${k.kind} is reconciled to Ready", async (t) => {
  const env = await useTestEnv();
  t.after(() => env.cleanup());
  await env.installCrds([crdFor(${k.kind})]);
  const ns = await env.namespace("${k.lower}");
  const mgr = await Manager.create({
    kubeconfig: env.kubeconfigPath,
    name: "${k.lower}-test",
    metrics: false,
    health: false,
    leaderElection: false,
  });
  mgr.add(${k.lower}Controller());
  await mgr.start();
  t.after(() => mgr.stop());

  await env.client.create(${k.kind}.new("sample", { size: 2 }${ns}));
  const obj = await eventually("Ready=True", async () => {
    const live = await env.client.get(${k.kind}, "sample"${ns});
    return getCondition(live.status?.conditions, "Ready")?.status === "True" ? live : undefined;
  });
  assert.equal(obj.spec.size, 2);
});
`;
}
