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
export const SCAFFOLD_WEBHOOKS = "// +opkit:scaffold:webhooks";

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
          build: "tsc --noEmit && opkit build",
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

/** .node-version: the Node line the project runs on, for the version managers that read it (fnm, nodenv, asdf, …). */
export const nodeVersion = "24\n";

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

// .opkit/ holds the webhook CA and key; webhook-secret.yaml the Secret made from them.
export const gitignore =
  "node_modules/\n.opkit/\nconfig/webhook-secret.yaml\nchart/templates/webhook-secret.yaml\n";

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
  webhooks: [
    ${SCAFFOLD_WEBHOOKS}
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
- \`npx opkit create webhook --kind <Kind> --programmatic-validation --defaulting\` — admission webhooks (\`--conversion\` for a kind with several versions)
- \`npx opkit run --install-crds --local-webhooks\` — run against the current kubeconfig; webhooks are registered to call this process
- \`npx opkit generate crd src/api/<version>/<kind>.ts\` — print one kind's CRD

When \`vendor/\` exists it holds the opkit packages this project installs (\`file:vendor/….tgz\` in
package.json, made by \`opkit init\` from a checkout or offline). Commit it; \`npm ci\` and the Dockerfile
use it. To take opkit from the npm registry instead:
\`npm install opkit@^<version> @opkit/cli@^<version> && rm -rf vendor && npx opkit generate\`.
`;
}

export function kindTs(k: KindVars): string {
  return `/** ${k.kind}: the ${k.fullGroup}/${k.version} API, defined once — types, validation and the CRD come from here. */
import * as Type from "typebox/type";
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
import { crdsFor } from "opkit/generate";
import { eventually, useTestEnv } from "opkit/testenv";
import operator from "../src/operator.ts";
import { ${k.kind} } from "../src/api/${k.version}/${k.lower}.ts";
import { ${k.lower}Controller } from "../src/controllers/${k.lower}.ts";

test("a ${k.kind} is reconciled to Ready", async (t) => {
  const env = await useTestEnv();
  t.after(() => env.cleanup());
  // The CRDs as opkit generate writes them (every version of every kind).
  await env.installCrds(crdsFor(operator.kinds as Parameters<typeof crdsFor>[0]));
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

export interface WebhookVars extends KindVars {
  validation: boolean;
  defaulting: boolean;
}

/** src/webhooks/<kind>.ts: the validator and/or defaulter of one kind. */
export function webhookTs(w: WebhookVars): string {
  const imports = [w.validation ? "deny, validator" : "", w.defaulting ? "defaulter" : ""]
    .filter(Boolean)
    .join(", ");
  let out = `/**
 * Admission webhooks for ${w.kind}: checks and defaults OpenAPI cannot express. The manager serves them;
 * \`opkit generate\` writes the webhook configurations; \`opkit run --local-webhooks\` registers them
 * against this machine. A validator is also callable from the controller (\`${w.lower}Validator.validate(obj)\`)
 * for clusters where the webhook is not installed.
 */
import { ${imports} } from "opkit";
import { ${w.kind} } from "../api/${w.version}/${w.lower}.ts";
`;
  if (w.validation)
    out += `
/** The largest change of spec.size in one update (an example of a rule that needs the old object). */
export const MAX_SIZE_STEP = 10;

export const ${w.lower}Validator = validator(${w.kind}, {
  // create(obj) { ... } — return deny("why", { field: "spec.x" }) or throw new ValidationError(...).
  update(oldObj, newObj) {
    const step = Math.abs(newObj.spec.size - oldObj.spec.size);
    if (step > MAX_SIZE_STEP)
      return deny(\`may change by at most \${MAX_SIZE_STEP} at a time (asked \${oldObj.spec.size} -> \${newObj.spec.size})\`, {
        field: "spec.size",
      });
  },
});
`;
  if (w.defaulting)
    out += `
/** Label key the defaulter fills (an example default; replace it with yours). */
export const TIER_LABEL = "${w.fullGroup}/tier";

export const ${w.lower}Defaulter = defaulter(${w.kind}, (obj) => {
  obj.metadata.labels = { ...obj.metadata.labels };
  obj.metadata.labels[TIER_LABEL] ??= obj.spec.size > 3 ? "large" : "small";
});
`;
  return out;
}

export interface ConversionVars {
  kind: string;
  lower: string;
  fullGroup: string;
  hub: string;
  spokes: string[];
}

function versionIdent(kind: string, version: string): string {
  return kind + version.charAt(0).toUpperCase() + version.slice(1);
}

/** src/webhooks/<kind>-conversion.ts: hub-and-spoke conversion between the kind's versions. */
export function conversionTs(c: ConversionVars): string {
  const hub = versionIdent(c.kind, c.hub);
  const imports = [c.hub, ...c.spokes]
    .map((v) => `import { ${c.kind} as ${versionIdent(c.kind, v)} } from "../api/${v}/${c.lower}.ts";`)
    .join("\n");
  const spokes = c.spokes
    .map(
      (v) => `    {
      kind: ${versionIdent(c.kind, v)},
      // ${v} -> ${c.hub}. While the schemas are equal this copies; when they differ, map the fields here.
      toHub: (obj) => ({ spec: { ...obj.spec }, status: obj.status }),
      // ${c.hub} -> ${v}.
      fromHub: (hub) => ({ spec: { ...hub.spec }, status: hub.status }),
      // Fields one side cannot hold (e.g. ".spec.legacyMode"), kept in an annotation across the round trip;
      // test/${c.lower}-conversion.test.ts names any field that does not survive.
      spokeOnly: [],
      hubOnly: [],
    },`,
    )
    .join("\n");
  return `/**
 * Conversion between the versions of ${c.kind}: ${c.hub} is the hub (the storage version); every other
 * version converts to and from it. The API server calls this webhook to serve an object in a version
 * other than the one it was stored in.
 */
import { conversion } from "opkit";
${imports}

export const ${c.lower}Conversion = conversion({
  hub: ${hub},
  spokes: [
${spokes}
  ],
});
`;
}

/**
 * test/<kind>-conversion.test.ts: the conversion proven lossless with generated objects of every version,
 * without a cluster (npm test runs it).
 */
export function conversionPropertyTestTs(c: ConversionVars): string {
  return `/**
 * The ${c.kind} conversion is lossless: objects generated from every version's schema come back unchanged
 * from a round trip through the hub (${c.hub}) and back. When a version cannot hold a field, declare it in
 * the spoke's spokeOnly or hubOnly (src/webhooks/${c.lower}-conversion.ts) and opkit keeps it in an
 * annotation; the failure message names the field.
 */
import { test } from "node:test";
import { checkConversion } from "opkit/testenv";
import { ${c.lower}Conversion } from "../src/webhooks/${c.lower}-conversion.ts";

test("the ${c.kind} conversion round-trips every version through the hub", async () => {
  await checkConversion(${c.lower}Conversion, { numRuns: 300 });
});
`;
}

/** test/<kind>-webhook.int.test.ts: the real API server calls the webhooks. */
export function webhookTestTs(w: WebhookVars, conv?: ConversionVars): string {
  // Long on purpose: a template: most lines are the generated test's own text.
  const ns = w.clusterScoped ? "" : ", { namespace: ns }";
  const nsOpt = w.clusterScoped ? "" : "{ namespace: ns }";
  const handlers = [
    w.validation ? `${w.lower}Validator` : "",
    w.defaulting ? `${w.lower}Defaulter` : "",
    conv ? `${w.lower}Conversion` : "",
  ].filter(Boolean);
  const kindImports = conv
    ? [conv.hub, ...conv.spokes]
        .map(
          (v) => `import { ${w.kind} as ${versionIdent(w.kind, v)} } from "../src/api/${v}/${w.lower}.ts";`,
        )
        .join("\n")
    : `import { ${w.kind} } from "../src/api/${w.version}/${w.lower}.ts";`;
  const K = conv ? versionIdent(w.kind, conv.hub) : w.kind;
  const admission = [
    w.validation ? `${w.lower}Validator` : "",
    w.defaulting ? `${w.lower}Defaulter` : "",
  ].filter(Boolean);
  let out = `/** ${w.kind} webhooks against a real local control plane (opkit env): the API server calls them. */
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { Metrics, startLocalWebhooks, type RunningLocalWebhooks } from "opkit";
import { crdsFor } from "opkit/generate";
import { eventually, useTestEnv, type TestEnv } from "opkit/testenv";
import operator from "../src/operator.ts";
${kindImports}
${admission.length ? `import { ${[...admission, w.defaulting ? "TIER_LABEL" : ""].filter(Boolean).join(", ")} } from "../src/webhooks/${w.lower}.ts";\n` : ""}${conv ? `import { ${w.lower}Conversion } from "../src/webhooks/${w.lower}-conversion.ts";\n` : ""}
describe("${w.kind} webhooks", () => {
  let env: TestEnv;
  let ns: string;
  let hooks: RunningLocalWebhooks;
  const metrics = new Metrics({ processMetrics: false });
  before(async () => {
    env = await useTestEnv();
    await env.installCrds(crdsFor(operator.kinds as Parameters<typeof crdsFor>[0]));
    ns = await env.namespace("${w.lower}-webhooks");
    hooks = await startLocalWebhooks({
      client: env.client,
      name: \`${w.lower}-webhook-test-\${process.pid}\`,
      handlers: [${handlers.join(", ")}],
      metrics,
    });
    // The API server picks up new webhook configurations within a moment: wait until it calls ours.
    await eventually(
      "the webhooks are called",
      async () => {
        const probe = await env.client.create(${K}.new(\`probe-\${Date.now()}\`, { size: 1 }${ns}), { dryRun: true });
        return ${w.defaulting ? `probe.metadata.labels?.[TIER_LABEL] === "small"` : "true"};
      },
      30_000,
    );
  });
  after(async () => {
    await hooks?.stop();
    await env?.cleanup();
  });
`;
  if (w.validation)
    out += `
  it("refuses a change of spec.size that is too large, naming the field", async () => {
    const obj = await env.client.create(${K}.new("step", { size: 2 }${ns}));
    obj.spec.size = 50;
    await eventually("the validator refuses", async () => {
      try {
        await env.client.update(obj, { dryRun: true });
        return false;
      } catch (err) {
        return /spec\\.size: may change by at most/.test((err as Error).message);
      }
    });
    obj.spec.size = 12;
    const ok = await env.client.update(obj);
    assert.equal(ok.spec.size, 12);
    // The same function decides in a reconcile, without the webhook.
    assert.equal((await ${w.lower}Validator.validate({ ...ok, spec: { ...ok.spec, size: 40 } }, ok)).allowed, false);
  });
`;
  if (w.defaulting)
    out += `
  it("fills defaults that are visible in the stored object", async () => {
    await env.client.create(${K}.new("defaults", { size: 5 }${ns}));
    const stored = await env.client.get(${K}, "defaults"${ns ? `, ${nsOpt}` : ""});
    assert.equal(stored.metadata.labels?.[TIER_LABEL], "large");
  });
`;
  if (conv)
    out += conv.spokes
      .map(
        (v) => `
  it("converts between ${v} and ${conv.hub} through the webhook", async () => {
    const S = ${versionIdent(w.kind, v)};
    await env.client.create(S.new("from-${v}", { size: 3 }${ns}));
    const asHub = await env.client.get(${versionIdent(w.kind, conv.hub)}, "from-${v}"${ns ? `, ${nsOpt}` : ""});
    assert.equal(asHub.apiVersion, "${conv.fullGroup}/${conv.hub}");
    assert.equal(asHub.spec.size, 3);
    await env.client.create(${versionIdent(w.kind, conv.hub)}.new("from-${conv.hub}-to-${v}", { size: 4 }${ns}));
    const asSpoke = await env.client.get(S, "from-${conv.hub}-to-${v}"${ns ? `, ${nsOpt}` : ""});
    assert.equal(asSpoke.apiVersion, "${conv.fullGroup}/${v}");
    assert.equal(asSpoke.spec.size, 4);
    // The API server asked the webhook (not just relabelled the object).
    const calls = /controller_runtime_webhook_requests_total\\{webhook="\\/convert-[^"]*",code="200"\\} (\\d+)/.exec(await metrics.text());
    assert.ok(Number(calls?.[1]) > 0, "the conversion webhook was called");
  });
`,
      )
      .join("");
  out += `});
`;
  return out;
}

/** A kind the project reconciles without defining it: a built-in one or another project's CRD. */
export interface ForeignKindVars {
  kind: string;
  lower: string;
  apiVersion: string;
  /** The constant the controller uses, e.g. `Deployments`. */
  ref: string;
  /** Names imported from "opkit" to have `ref` (e.g. `Deployments`, or `kindRef`). */
  opkitImports: string[];
  /** What else brings `ref` into a file under src/controllers/ (an import or a declaration), if anything. */
  refDecl: string;
  /** The same, from a file under test/. */
  refDeclFromTest: string;
  clusterScoped: boolean;
  /** A minimal valid object of the kind for the test (JSON), or undefined when unknown. */
  sample?: string;
}

/** src/controllers/<kind>.ts for a kind the project does not define: reads it, records an Event. */
export function foreignControllerTs(k: ForeignKindVars): string {
  return `/**
 * The ${k.kind} controller: reconciles ${k.apiVersion} ${k.kind} objects, which this project does not
 * define. Its generated RBAC reads them and writes Events; a write to a ${k.kind} is declared below.
 */
import { ${["controller", ...k.opkitImports].join(", ")} } from "opkit";
${k.refDecl}
export function ${k.lower}Controller() {
  return controller("${k.lower}")
    .for(${k.ref})
    // What the reconcile writes beyond Events, for the generated RBAC, e.g.
    // .rbac([{ kind: ${k.ref}, verbs: ["patch"] }])
    .reconcile(async (req, ctx) => {
      const obj = ctx.cache.get(${k.ref}, req.name${k.clusterScoped ? "" : ", { namespace: req.namespace }"});
      if (!obj) return; // deleted
      // Act on obj here.
      ctx.log.info("reconciling");
      await ctx.recorder.record(obj, {
        type: "Normal",
        reason: "Reconciled",
        action: "Reconcile",
        note: "reconciled by ${k.lower}",
      });
    });
}
`;
}

/** test/<kind>.int.test.ts for a foreign kind: an object of it gets the controller's Event. */
export function foreignKindTestTs(k: ForeignKindVars): string {
  const ns = k.clusterScoped ? "" : "ns";
  return `/** The ${k.kind} controller against a real local control plane (opkit env). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { ${["EventsV1", "Manager", ...k.opkitImports, "type KubeObject"].join(", ")} } from "opkit";
import { eventually, useTestEnv } from "opkit/testenv";
${k.refDeclFromTest}import { ${k.lower}Controller } from "../src/controllers/${k.lower}.ts";

test("a ${k.kind} is reconciled", async (t) => {
  const env = await useTestEnv();
  t.after(() => env.cleanup());
  ${k.clusterScoped ? "" : `const ns = await env.namespace("${k.lower}");\n  `}const mgr = await Manager.create({
    kubeconfig: env.kubeconfigPath,
    name: "${k.lower}-test",
    metrics: false,
    health: false,
    leaderElection: false,
  });
  mgr.add(${k.lower}Controller());
  await mgr.start();
  t.after(() => mgr.stop());

  // A minimal ${k.kind}: replace it with one your controller cares about.
  const obj = (${k.sample ?? "{}"}) as KubeObject;
  obj.metadata.name = \`sample-\${Date.now()}\`;
  ${k.clusterScoped ? "" : `obj.metadata.namespace = ${ns};\n  `}const created = await env.client.create(obj);
  t.after(() => env.client.delete(${k.ref}, created.metadata.name ?? ""${k.clusterScoped ? "" : ", { namespace: ns }"}).catch(() => {}));
  const event = await eventually("the Reconciled Event", async () =>
    (await env.client.list(EventsV1${k.clusterScoped ? "" : ", { namespace: ns }"})).items.find(
      (e) => e.regarding?.uid === created.metadata.uid && e.reason === "Reconciled",
    ),
  );
  assert.equal(event.type, "Normal");
});
`;
}
