/**
 * `opkit init` and `opkit create api`: scaffold an operator project and add kinds to it.
 */
import { Command, InvalidArgumentError } from "commander";
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, readFile, readdir, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join, resolve } from "node:path";
import { createHash } from "node:crypto";
import * as opkit from "opkit";
import { defaultPlural, knownKind } from "opkit";
import { crdsFromYaml, typesFromCrd } from "opkit/generate";
import {
  SCAFFOLD_CONTROLLERS,
  SCAFFOLD_IMPORTS,
  SCAFFOLD_KINDS,
  SCAFFOLD_WEBHOOKS,
  controllerTs,
  conversionPropertyTestTs,
  conversionTs,
  foreignControllerTs,
  foreignKindTestTs,
  gitignore,
  kindTestTs,
  kindTs,
  mainTs,
  nodeVersion,
  operatorTs,
  packageJson,
  readme,
  sampleYaml,
  tsconfig,
  webhookTestTs,
  webhookTs,
  type ConversionVars,
  type ForeignKindVars,
  type KindVars,
  type WebhookVars,
} from "../scaffold/templates.ts";
import { packInto, wireDependencies } from "../scaffold/packages.ts";

export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)+$/;

export function checkDomain(v: string): string {
  if (!DNS_NAME.test(v)) {
    throw new InvalidArgumentError(
      `"${v}" is not a DNS domain: use lowercase labels separated by dots, e.g. example.com`,
    );
  }
  return v;
}
export function checkGroup(v: string): string {
  if (!DNS_LABEL.test(v) && !DNS_NAME.test(v)) {
    throw new InvalidArgumentError(
      `"${v}" is not a valid API group: use lowercase letters, digits and '-', e.g. cache`,
    );
  }
  return v;
}
export function checkVersion(v: string): string {
  if (!/^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$/.test(v)) {
    throw new InvalidArgumentError(`"${v}" is not a Kubernetes API version: use v1, v1alpha1, v2beta3, …`);
  }
  return v;
}
export function checkKind(v: string): string {
  if (!/^[A-Z][A-Za-z0-9]{0,62}$/.test(v)) {
    throw new InvalidArgumentError(
      `"${v}" is not a valid kind: use UpperCamelCase letters and digits, e.g. Memcached`,
    );
  }
  return v;
}

/** kubebuilder's boolean flags: `--resource`, `--resource=true`, `--resource=false`. */
export function checkBool(v: string | boolean): boolean {
  if (v === true || v === "true") return true;
  if (v === "false") return false;
  throw new InvalidArgumentError(`"${String(v)}" is not a boolean: use true or false, e.g. --resource=false`);
}

export function checkPlural(v: string): string {
  if (!DNS_LABEL.test(v))
    throw new InvalidArgumentError(`"${v}" is not a plural resource name: use lowercase letters, e.g. mice`);
  return v;
}

export async function initProject(
  dir: string,
  opts: {
    domain: string;
    name?: string;
    install?: boolean;
    /** Depend on a checkout through file: links (`true`: the one this CLI runs from). */
    link?: string | true;
    /** Vendor the packed packages even when the registry has them. */
    vendor?: boolean;
    /** Receives what was decided about the opkit dependency (default: stderr). */
    onNote?: (note: string) => void;
  },
): Promise<string> {
  const root = resolve(dir);
  if (existsSync(root) && (await readdir(root)).filter((f) => !f.startsWith(".")).length > 0) {
    throw new UsageError(`${root} is not empty: opkit init needs a new or empty directory`);
  }
  const name =
    opts.name ??
    basename(root)
      .toLowerCase()
      .replace(/[^a-z0-9-]/g, "-")
      .replace(/^-+|-+$/g, "");
  if (!DNS_LABEL.test(name)) throw new UsageError(`project name "${name}" must be a DNS label; pass --name`);
  const created = !existsSync(root);
  await mkdir(join(root, "src"), { recursive: true });
  const deps = await wireDependencies(root, { link: opts.link, vendor: opts.vendor }).catch(
    async (err: unknown) => {
      // Leave no half-made project behind: a second `opkit init` would find the directory not empty.
      if (created) await rm(root, { recursive: true, force: true });
      throw err;
    },
  );
  const onNote = opts.onNote ?? ((n: string) => process.stderr.write(`opkit init: ${n}\n`));
  for (const n of deps.notes) onNote(n);
  const vars = { name, domain: opts.domain, opkitSpec: deps.opkit, cliSpec: deps.cli };
  await mkdir(join(root, "test"), { recursive: true });
  const files: Record<string, string> = {
    "package.json": packageJson(vars),
    "tsconfig.json": tsconfig,
    ".node-version": nodeVersion,
    ".gitignore": gitignore,
    "README.md": readme(vars),
    "src/operator.ts": operatorTs(vars),
    "src/main.ts": mainTs,
  };
  for (const [f, content] of Object.entries(files)) await writeFile(join(root, f), content);
  if (opts.install ?? true) {
    const r = spawnSync("npm", ["install", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
    if (r.status !== 0)
      throw new UsageError(
        `npm install failed in ${root} (exit ${r.status}); fix the error above and run it again`,
      );
  }
  return root;
}

/** What `opkit create api` scaffolds (kubebuilder's flags). */
export interface CreateApiOptions {
  group: string;
  version: string;
  kind: string;
  /** Scaffold the kind's definition (default true); false: a controller for a kind defined elsewhere. */
  resource?: boolean;
  /** Scaffold a controller and its test (default true). */
  controller?: boolean;
  /** The kind is namespaced (default true). */
  namespaced?: boolean;
  /** @deprecated the same as `namespaced: false`. */
  clusterScoped?: boolean;
  /** The plural resource name when the English rule gets it wrong (default: `defaultPlural(kind)`). */
  plural?: string;
  /** A CRD file to type a foreign kind from (with `resource: false`). */
  fromCrd?: string;
  /** Rewrite scaffold files that exist already (only those the scaffold wrote and nobody edited since). */
  force?: boolean;
  /** Receives what --force rewrote and what it left alone (default: stdout). */
  onNote?: (note: string) => void;
}

/** Where the scaffold remembers what it wrote: `--force` rewrites a file only if it is unchanged since. */
const SCAFFOLD_RECORD = join(".opkit", "scaffold.json");

function digest(content: string): string {
  return createHash("sha256").update(content).digest("hex");
}

async function readRecord(root: string): Promise<Record<string, string>> {
  try {
    return JSON.parse(await readFile(join(root, SCAFFOLD_RECORD), "utf8")) as Record<string, string>;
  } catch {
    return {};
  }
}

/**
 * Write scaffold files. A file that exists is an error without `force`; with it, the file is rewritten
 * only when the scaffold wrote it and nobody edited it since (its digest is the recorded one); a file
 * the user wrote or edited is left alone and named. Returns the files written.
 */
async function writeScaffold(
  root: string,
  files: Record<string, string>,
  opts: { force?: boolean; onNote: (note: string) => void; skip?: (file: string) => boolean },
): Promise<string[]> {
  const record = await readRecord(root);
  const existing = Object.keys(files).filter((f) => !opts.skip?.(f) && existsSync(join(root, f)));
  if (existing.length > 0 && !opts.force)
    throw new UsageError(
      `${existing.join(", ")} exist${existing.length === 1 ? "s" : ""} already: pass --force to scaffold ${existing.length === 1 ? "it" : "them"} again (files you edited are kept)`,
    );
  const written: string[] = [];
  for (const [f, content] of Object.entries(files)) {
    if (opts.skip?.(f)) continue;
    const path = join(root, f);
    if (existsSync(path)) {
      const current = await readFile(path, "utf8");
      if (record[f] !== digest(current)) {
        opts.onNote(`kept ${f}: written or edited by you, not by the scaffold`);
        continue;
      }
      if (current === content) continue;
      opts.onNote(`--force: rewrote ${f}`);
    }
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, content);
    record[f] = digest(content);
    written.push(f);
  }
  await mkdir(join(root, ".opkit"), { recursive: true });
  await writeFile(join(root, SCAFFOLD_RECORD), JSON.stringify(record, null, 2) + "\n");
  return written;
}

/** The project's domain, from src/operator.ts. */
async function projectOperator(root: string): Promise<{ file: string; source: string; domain: string }> {
  const file = join(root, "src", "operator.ts");
  if (!existsSync(file))
    throw new UsageError(`${root} is not an opkit project (no src/operator.ts): run opkit init first`);
  const source = await readFile(file, "utf8");
  const domain = /domain: "([^"]+)"/.exec(source)?.[1];
  if (!domain) throw new UsageError(`src/operator.ts has no domain: "…" to build the API group from`);
  return { file, source, domain };
}

export async function createApi(dir: string, opts: CreateApiOptions): Promise<string[]> {
  const root = resolve(dir);
  const resource = opts.resource ?? true;
  const withController = opts.controller ?? true;
  if (!resource && !withController)
    throw new UsageError("--resource=false --controller=false: nothing to scaffold; drop one of them");
  if (opts.fromCrd && resource)
    throw new UsageError("--from-crd types a kind defined elsewhere: pass it with --resource=false");
  const onNote = opts.onNote ?? ((n: string) => console.log(n));
  if (!resource) return createForeignController(root, { ...opts, onNote });
  const { file: operatorFile, source: operator, domain } = await projectOperator(root);
  const lower = opts.kind.toLowerCase();
  const k: KindVars = {
    group: opts.group,
    fullGroup: opts.group.includes(".") ? opts.group : `${opts.group}.${domain}`,
    version: opts.version,
    kind: opts.kind,
    lower,
    plural: opts.plural ?? defaultPlural(opts.kind),
    clusterScoped: opts.namespaced === false || Boolean(opts.clusterScoped),
  };
  const kindFile = join("src", "api", k.version, `${lower}.ts`);
  const redo = existsSync(join(root, kindFile));
  if (redo && !opts.force)
    throw new UsageError(
      `${kindFile} exists already: kind ${k.kind} ${k.version} is defined (--force scaffolds its files again, keeping those you edited)`,
    );
  // Another version of a kind the project has: the controller, the test and the registration in
  // operator.ts exist already; only the definition, a sample and its entry in `kinds` are new.
  const existing = (await kindVersions(root, lower)).versions.filter((v) => v !== k.version);
  const files: Record<string, string> = {
    [kindFile]: kindTs(k),
    [join("config", "samples", `${k.group}_${k.version}_${lower}.yaml`)]: sampleYaml(k),
  };
  if (existing.length === 0 && withController) {
    files[join("src", "controllers", `${lower}.ts`)] = controllerTs(k);
    files[join("test", `${lower}.int.test.ts`)] = kindTestTs(k);
  }
  const written = await writeScaffold(root, files, { force: opts.force, onNote });
  // Registered once: a --force run finds its names in operator.ts already.
  if (redo) return written;
  const alias = `${k.kind}${k.version.charAt(0).toUpperCase()}${k.version.slice(1)}`;
  const controllerLines =
    existing.length === 0 && withController
      ? {
          imports: `import { ${lower}Controller } from "./controllers/${lower}.ts";\n`,
          entry: `${lower}Controller,\n    `,
        }
      : { imports: "", entry: "" };
  const updated =
    existing.length === 0
      ? operator
          .replace(
            SCAFFOLD_IMPORTS,
            `import { ${k.kind} } from "./api/${k.version}/${lower}.ts";\n${controllerLines.imports}${SCAFFOLD_IMPORTS}`,
          )
          .replace(SCAFFOLD_KINDS, `${k.kind},\n    ${SCAFFOLD_KINDS}`)
          .replace(SCAFFOLD_CONTROLLERS, `${controllerLines.entry}${SCAFFOLD_CONTROLLERS}`)
      : operator
          .replace(
            SCAFFOLD_IMPORTS,
            `import { ${k.kind} as ${alias} } from "./api/${k.version}/${lower}.ts";\n${SCAFFOLD_IMPORTS}`,
          )
          .replace(SCAFFOLD_KINDS, `${alias},\n    ${SCAFFOLD_KINDS}`);
  if (updated === operator)
    throw new UsageError("src/operator.ts lost its +opkit:scaffold markers; add the kind there by hand");
  await writeFile(operatorFile, updated);
  return written;
}

/** Minimal valid objects of common built-in kinds, for the scaffolded test of a foreign-kind controller. */
function sampleObject(apiVersion: string, kind: string): string {
  const labels = `{ app: "sample" }`;
  const pod = `{ containers: [{ name: "main", image: "busybox" }] }`;
  const template = `{ metadata: { labels: ${labels} }, spec: ${pod} }`;
  const spec: Record<string, string> = {
    Deployment: `{ selector: { matchLabels: ${labels} }, template: ${template} }`,
    StatefulSet: `{ selector: { matchLabels: ${labels} }, serviceName: "sample", template: ${template} }`,
    DaemonSet: `{ selector: { matchLabels: ${labels} }, template: ${template} }`,
    ReplicaSet: `{ selector: { matchLabels: ${labels} }, template: ${template} }`,
    Job: `{ template: { spec: { ...${pod}, restartPolicy: "Never" } } }`,
    Pod: pod,
    Service: `{ ports: [{ port: 80 }] }`,
  };
  const body = spec[kind] ? `, spec: ${spec[kind]}` : "";
  return `{ apiVersion: "${apiVersion}", kind: "${kind}", metadata: {}${body} }`;
}

/**
 * `create api --resource=false --controller`: a controller for a kind the project does not define — a
 * built-in one (typed by opkit's kind constants and `opkit/schemas`) or another project's, typed from its
 * CRD (`--from-crd`, through `typesFromCrd`; the CRD is kept in crds/ so generate can resolve it).
 */
async function createForeignController(
  root: string,
  opts: CreateApiOptions & { onNote: (note: string) => void },
): Promise<string[]> {
  const { file: operatorFile, source: operator } = await projectOperator(root);
  const lower = opts.kind.toLowerCase();
  const files: Record<string, string> = {};
  let vars: ForeignKindVars;
  if (opts.fromCrd) {
    const text = await readFile(resolve(opts.fromCrd), "utf8").catch(() => {
      throw new UsageError(`--from-crd ${opts.fromCrd}: no such file; pass the CRD's YAML`);
    });
    const crd = crdsFromYaml(text).find((d) => d.spec.names.kind === opts.kind);
    if (!crd)
      throw new UsageError(
        `--from-crd ${opts.fromCrd}: no CustomResourceDefinition of kind ${opts.kind} in it`,
      );
    const group = crd.spec.group;
    if (!crd.spec.versions?.some((v) => v.name === opts.version))
      throw new UsageError(
        `--version ${opts.version}: the CRD of ${opts.kind} serves ${(crd.spec.versions ?? []).map((v) => v.name).join(", ")}`,
      );
    const typesFile = join("src", "api", "external", `${crd.spec.names.plural}.${group}.ts`);
    files[typesFile] = typesFromCrd(text);
    files[join("crds", `${crd.spec.names.plural}.${group}.yaml`)] = text;
    const ref = `${opts.kind}${opts.version.charAt(0).toUpperCase()}${opts.version.slice(1)}`;
    const from = `api/external/${crd.spec.names.plural}.${group}.ts`;
    vars = {
      kind: opts.kind,
      lower,
      apiVersion: `${group}/${opts.version}`,
      ref,
      opkitImports: [],
      refDecl: `import { ${ref} } from "../${from}";\n`,
      refDeclFromTest: `import { ${ref} } from "../src/${from}";\n`,
      clusterScoped: crd.spec.scope === "Cluster",
    };
  } else {
    const apiVersion = opts.group === "core" ? opts.version : `${opts.group}/${opts.version}`;
    const known = knownKind({ apiVersion, kind: opts.kind });
    if (!known)
      throw new UsageError(
        `${apiVersion} ${opts.kind} is not a built-in kind opkit knows: pass its CRD with --from-crd <file> (core kinds take --group core)`,
      );
    const constant = builtinConstant(apiVersion, opts.kind);
    vars = {
      kind: opts.kind,
      lower,
      apiVersion,
      ref: constant ?? opts.kind,
      opkitImports: [constant ?? "kindRef"],
      refDecl: constant ? "" : `\nconst ${opts.kind} = kindRef("${apiVersion}", "${opts.kind}");\n`,
      refDeclFromTest: constant ? "" : `\nconst ${opts.kind} = kindRef("${apiVersion}", "${opts.kind}");\n`,
      clusterScoped: known.scope === "Cluster",
      sample: sampleObject(apiVersion, opts.kind),
    };
  }
  vars.sample ??= sampleObject(vars.apiVersion, opts.kind);
  files[join("src", "controllers", `${lower}.ts`)] = foreignControllerTs(vars);
  files[join("test", `${lower}.int.test.ts`)] = foreignKindTestTs(vars);
  const redo = existsSync(join(root, "src", "controllers", `${lower}.ts`));
  const written = await writeScaffold(root, files, { force: opts.force, onNote: opts.onNote });
  if (redo) return written;
  const updated = operator
    .replace(
      SCAFFOLD_IMPORTS,
      `import { ${lower}Controller } from "./controllers/${lower}.ts";\n${SCAFFOLD_IMPORTS}`,
    )
    .replace(SCAFFOLD_CONTROLLERS, `${lower}Controller,\n    ${SCAFFOLD_CONTROLLERS}`);
  if (updated === operator)
    throw new UsageError(
      "src/operator.ts lost its +opkit:scaffold markers; add the controller there by hand",
    );
  await writeFile(operatorFile, updated);
  return written;
}

/** The name of opkit's exported kind constant for a built-in kind (e.g. `Deployments`), if any. */
function builtinConstant(apiVersion: string, kind: string): string | undefined {
  for (const [name, value] of Object.entries(opkit))
    if (
      /^[A-Z]/.test(name) &&
      typeof value === "object" &&
      value !== null &&
      (value as { apiVersion?: unknown }).apiVersion === apiVersion &&
      (value as { kind?: unknown }).kind === kind &&
      Object.keys(value).length === 2
    )
      return name;
  return undefined;
}

/** What to do after adding a version to a kind that had one already. */
export function newVersionHint(kind: string, versions: readonly string[]): string {
  return `${kind} now has versions ${versions.join(", ")}: set storage: true in the defineKind of the version objects are stored in, then npx opkit create webhook --kind ${kind} --conversion`;
}

export interface CreateWebhookOptions {
  kind: string;
  /** The kind's group, short or full; checked against the group of its definition. */
  group?: string;
  /** The version the admission webhooks are for (default: the only version, or the storage version). */
  version?: string;
  validation?: boolean;
  defaulting?: boolean;
  conversion?: boolean;
}

/** Versions of a kind in the project (src/api/<version>/<kind>.ts) and which one says storage: true. */
async function kindVersions(root: string, lower: string): Promise<{ versions: string[]; storage?: string }> {
  const api = join(root, "src", "api");
  const dirs = existsSync(api) ? await readdir(api) : [];
  const versions = dirs.filter((v) => existsSync(join(api, v, `${lower}.ts`))).sort();
  let storage: string | undefined;
  for (const v of versions)
    if (/storage:\s*true/.test(await readFile(join(api, v, `${lower}.ts`), "utf8"))) storage = v;
  return { versions, storage };
}

/**
 * `opkit create webhook`: the handler files of a kind, their registration in src/operator.ts (so the
 * manager serves them and `opkit generate` writes their configurations), and a test of their own that
 * runs with the real API server calling them.
 */
export async function createWebhook(dir: string, opts: CreateWebhookOptions): Promise<string[]> {
  // Long on purpose: the project's checks, each webhook kind's files, then their registration, each step using the one before.
  const root = resolve(dir);
  const operatorFile = join(root, "src", "operator.ts");
  if (!existsSync(operatorFile))
    throw new UsageError(`${root} is not an opkit project (no src/operator.ts): run opkit init first`);
  if (!opts.validation && !opts.defaulting && !opts.conversion)
    throw new UsageError(
      "say which webhooks to add: --programmatic-validation, --defaulting and/or --conversion",
    );
  const operator = await readFile(operatorFile, "utf8");
  const domain = /domain: "([^"]+)"/.exec(operator)?.[1] ?? "";
  const lower = opts.kind.toLowerCase();
  const { versions, storage } = await kindVersions(root, lower);
  if (versions.length === 0)
    throw new UsageError(
      `kind ${opts.kind} is not defined here (no src/api/<version>/${lower}.ts): run opkit create api --kind ${opts.kind} first`,
    );
  const admission = Boolean(opts.validation || opts.defaulting);
  // Conversion involves every version; the admission webhooks are for one.
  const version = opts.version ?? (versions.length === 1 || !admission ? (storage ?? versions[0]) : storage);
  if (!version || !versions.includes(version))
    throw new UsageError(
      `--version ${opts.version ?? "(none)"}: ${opts.kind} has versions ${versions.join(", ")}; pass --version with one of them`,
    );
  const kindSource = await readFile(join(root, "src", "api", version, `${lower}.ts`), "utf8");
  const fullGroup = /group: "([^"]+)"/.exec(kindSource)?.[1] ?? domain;
  if (opts.group !== undefined && opts.group !== fullGroup && `${opts.group}.${domain}` !== fullGroup)
    throw new UsageError(`--group ${opts.group}: ${opts.kind} is defined in group ${fullGroup}`);
  const k: KindVars = {
    group: fullGroup.split(".")[0] ?? fullGroup,
    fullGroup,
    version,
    kind: opts.kind,
    lower,
    plural: /plural: "([^"]+)"/.exec(kindSource)?.[1] ?? defaultPlural(opts.kind),
    clusterScoped: /scope: "Cluster"/.test(kindSource),
  };
  const files: Record<string, string> = {};
  const registrations: { name: string; from: string }[] = [];
  if (opts.validation || opts.defaulting) {
    const w: WebhookVars = {
      ...k,
      validation: Boolean(opts.validation),
      defaulting: Boolean(opts.defaulting),
    };
    files[join("src", "webhooks", `${lower}.ts`)] = webhookTs(w);
    files[join("test", `${lower}-webhook.int.test.ts`)] = webhookTestTs(w);
    if (w.validation) registrations.push({ name: `${lower}Validator`, from: `./webhooks/${lower}.ts` });
    if (w.defaulting) registrations.push({ name: `${lower}Defaulter`, from: `./webhooks/${lower}.ts` });
  }
  if (opts.conversion) {
    if (versions.length < 2)
      throw new UsageError(
        `--conversion: ${opts.kind} has one version (${versions.join("")}); add another with opkit create api --version <v> --kind ${opts.kind} first`,
      );
    if (!storage)
      throw new UsageError(
        `--conversion: no version of ${opts.kind} says storage: true; add it to the defineKind of the version objects are stored in (the hub)`,
      );
    const c: ConversionVars = {
      kind: opts.kind,
      lower,
      fullGroup,
      hub: storage,
      spokes: versions.filter((v) => v !== storage),
    };
    files[join("src", "webhooks", `${lower}-conversion.ts`)] = conversionTs(c);
    files[join("test", `${lower}-conversion.int.test.ts`)] = webhookTestTs(
      { ...k, version: storage, validation: false, defaulting: false },
      c,
    );
    files[join("test", `${lower}-conversion.test.ts`)] = conversionPropertyTestTs(c);
    registrations.push({ name: `${lower}Conversion`, from: `./webhooks/${lower}-conversion.ts` });
  }
  for (const f of Object.keys(files))
    if (existsSync(join(root, f)))
      throw new UsageError(`${f} exists already: edit it, or remove it to scaffold the webhook again`);
  let updated = operator;
  if (!updated.includes(SCAFFOLD_WEBHOOKS)) {
    // Projects made before webhooks existed: add the list next to the controllers.
    updated = updated.replace(/\n\}\);\s*$/, `\n  webhooks: [\n    ${SCAFFOLD_WEBHOOKS}\n  ],\n});\n`);
  }
  const byFile = new Map<string, string[]>();
  for (const r of registrations) byFile.set(r.from, [...(byFile.get(r.from) ?? []), r.name]);
  const imports = [...byFile]
    .map(([from, names]) => `import { ${names.join(", ")} } from "${from}";\n`)
    .join("");
  const before = updated;
  updated = updated
    .replace(SCAFFOLD_IMPORTS, `${imports}${SCAFFOLD_IMPORTS}`)
    .replace(
      SCAFFOLD_WEBHOOKS,
      `${registrations.map((r) => `${r.name},\n    `).join("")}${SCAFFOLD_WEBHOOKS}`,
    );
  if (updated === before || !updated.includes(SCAFFOLD_WEBHOOKS))
    throw new UsageError("src/operator.ts lost its +opkit:scaffold markers; add the webhooks there by hand");
  for (const [f, content] of Object.entries(files)) {
    await mkdir(dirname(join(root, f)), { recursive: true });
    await writeFile(join(root, f), content);
  }
  await writeFile(operatorFile, updated);
  const written = Object.keys(files);
  // The conversion's property test generates objects with fast-check, a dev dependency of the project.
  if (opts.conversion && (await addDevDependency(root, "fast-check", FAST_CHECK_VERSION)))
    written.push("package.json");
  return written;
}

/** The fast-check release scaffolded conversion tests are written for. */
const FAST_CHECK_VERSION = "^4.10.2";

/** Adds a dev dependency to the project's package.json unless it has it; true when it added it. */
async function addDevDependency(root: string, name: string, range: string): Promise<boolean> {
  const file = join(root, "package.json");
  const pkg = JSON.parse(await readFile(file, "utf8")) as {
    dependencies?: Record<string, string>;
    devDependencies?: Record<string, string>;
  };
  if (pkg.devDependencies?.[name] ?? pkg.dependencies?.[name]) return false;
  pkg.devDependencies = { ...pkg.devDependencies, [name]: range };
  await writeFile(file, JSON.stringify(pkg, null, 2) + "\n");
  return true;
}

export function projectCommands(): Command[] {
  // Long on purpose: commander definitions, one chained call per command and option.
  const init = new Command("init")
    .description("create a new operator project that installs, builds and passes its own tests")
    .argument("[dir]", "project directory: new or empty; its name is the project's name", ".")
    .option(
      "--domain <domain>",
      "API domain of the project's kinds, e.g. example.com (kinds get groups like cache.<domain>)",
      checkDomain,
      "my.domain",
    )
    .option("--name <name>", "operator name (default: the directory name)")
    .option(
      "--link [checkout]",
      "depend on an opkit checkout through file: links, for opkit's own development (default: the checkout this CLI runs from)",
    )
    .option("--vendor", "vendor the packed opkit packages into vendor/ even when the npm registry has them")
    .option("--no-install", "do not run npm install")
    .action(
      async (
        dir: string,
        o: { domain: string; name?: string; link?: string | true; vendor?: boolean; install: boolean },
      ) => {
        const root = await initProject(dir, o);
        console.log(
          `created ${root}\nnext: cd ${dir} && npx opkit create api --group <group> --version v1alpha1 --kind <Kind>`,
        );
      },
    );

  const create = new Command("create").description("add to an operator project");
  create
    .command("api")
    .description(
      "add a kind: its definition, a controller that reconciles it, a sample and a test (--resource=false: a controller for a built-in or another project's kind)",
    )
    .requiredOption(
      "--group <group>",
      "API group (short, the project domain is appended), e.g. cache; with --resource=false the kind's own group, e.g. apps (core for the core group)",
      checkGroup,
    )
    .requiredOption("--version <version>", "API version, e.g. v1alpha1", checkVersion)
    .requiredOption("--kind <Kind>", "kind in UpperCamelCase, e.g. Memcached", checkKind)
    .option(
      "--resource [bool]",
      "scaffold the kind's definition (--resource=false: the kind is defined elsewhere)",
      checkBool,
      true,
    )
    .option("--controller [bool]", "scaffold a controller and its test", checkBool, true)
    .option(
      "--namespaced [bool]",
      "the kind is namespaced (--namespaced=false: cluster-scoped)",
      checkBool,
      true,
    )
    .option("--cluster-scoped", "the same as --namespaced=false")
    .option(
      "--plural <plural>",
      "the plural resource name, when the English rule gets it wrong (e.g. --plural=mice)",
      checkPlural,
    )
    .option(
      "--from-crd <file>",
      "with --resource=false: type a kind another project defines from its CRD (YAML)",
    )
    .option(
      "--force",
      "scaffold files that exist again (only those the scaffold wrote and you did not edit; it says which)",
    )
    .option("--dir <dir>", "project directory", ".")
    .action(async (o: CreateApiOptions & { dir: string }) => {
      const files = await createApi(o.dir, o);
      for (const f of files) console.log(`wrote ${f}`);
      const { versions } = await kindVersions(resolve(o.dir), o.kind.toLowerCase());
      console.log(
        versions.length > 1
          ? `next: ${newVersionHint(o.kind, versions)}`
          : "next: npx opkit generate && npm test",
      );
    });
  create
    .command("webhook")
    .description(
      "add admission (--programmatic-validation, --defaulting) or conversion (--conversion) webhooks for a kind, wired into src/operator.ts, with a test",
    )
    .requiredOption("--kind <Kind>", "the kind, e.g. Memcached", checkKind)
    .option(
      "--group <group>",
      "the kind's API group, short or full (checked against its definition; default: the one defining the kind)",
      checkGroup,
    )
    .option(
      "--version <version>",
      "the API version the admission webhooks are for (default: the only or storage version)",
      checkVersion,
    )
    .option("--programmatic-validation", "a validating webhook (create/update/delete checks)")
    .option("--validation", "the same as --programmatic-validation")
    .option("--defaulting", "a defaulting (mutating) webhook")
    .option("--conversion", "a conversion webhook between the kind's versions (hub: the storage version)")
    .option("--dir <dir>", "project directory", ".")
    .action(async (o: CreateWebhookOptions & { programmaticValidation?: boolean; dir: string }) => {
      const files = await createWebhook(o.dir, {
        ...o,
        validation: Boolean(o.validation || o.programmaticValidation),
      });
      for (const f of files) console.log(`wrote ${f}`);
      // package.json changed only when a dev dependency (fast-check) was added.
      console.log(
        `next: ${files.includes("package.json") ? "npm install && " : ""}npx opkit generate && npm test`,
      );
    });
  const pack = new Command("pack")
    .description(
      "pack opkit and @opkit/cli as opkit init vendors them: to vendor them into an existing project (npm install ./opkit-<version>.tgz) or to publish them",
    )
    .option("--out <dir>", "directory for the tarballs", ".")
    .action(async (o: { out: string }) => {
      for (const p of await packInto(o.out)) console.log(`${p.path} ${p.integrity}`);
    });
  return [init, create, pack];
}
