/**
 * `opkit generate crd <file>`: print the CRDs of the kinds a module exports, as a YAML stream on stdout.
 * Works for any module, inside an `opkit init` project or not: the module is imported as Node imports
 * it (TypeScript runs directly on Node 24), so its `opkit` comes from wherever the module finds it.
 * Kinds are recognized by shape, not by identity, because that `opkit` may be another copy than the CLI's.
 */
import { Command } from "commander";
import { existsSync, statSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import type { KindDefinition, KindVersions } from "opkit";
import { crdYaml } from "opkit/generate";
import { UsageError } from "./project.ts";

type KindSource = KindDefinition | KindVersions;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null;
}

/** A `defineKind` result: the fields the CRD is made of, and its `validate`/`new` functions. */
export function isKindDefinition(v: unknown): v is KindDefinition {
  return (
    isRecord(v) &&
    ["apiVersion", "group", "version", "kind", "plural", "scope"].every((f) => typeof v[f] === "string") &&
    isRecord(v.spec) &&
    typeof v.validate === "function" &&
    typeof v.new === "function"
  );
}

/** A `defineKindVersions` result. */
export function isKindVersionsValue(v: unknown): v is KindVersions {
  return (
    isRecord(v) &&
    Array.isArray(v.versions) &&
    v.versions.length > 0 &&
    v.versions.every(isKindDefinition) &&
    isKindDefinition(v.storageVersion)
  );
}

/**
 * The kinds among a module's exports: kind definitions, grouped versions, and the kinds of an exported
 * operator definition (`export default defineOperator({ kinds })`), each once, in export order.
 */
export function kindsOf(mod: Record<string, unknown>): KindSource[] {
  const out: KindSource[] = [];
  const seen = new Set<unknown>();
  const add = (v: unknown): void => {
    if (seen.has(v)) return;
    if (isKindVersionsValue(v)) {
      seen.add(v);
      for (const d of v.versions) seen.add(d);
      // A definition exported alone as well as inside its versions group is printed once, in the group.
      for (let i = out.length - 1; i >= 0; i--)
        if (v.versions.includes(out[i] as KindDefinition)) out.splice(i, 1);
      out.push(v);
    } else if (isKindDefinition(v)) {
      seen.add(v);
      out.push(v);
    }
  };
  for (const value of Object.values(mod)) {
    add(value);
    if (isRecord(value) && Array.isArray(value.kinds) && typeof value.name === "string") {
      for (const k of value.kinds as unknown[]) add(k);
    }
  }
  return out;
}

function nameOf(k: KindSource): string {
  return `${k.kind} (${k.plural}.${k.group})`;
}

/** Keep the kinds `--kind` names: the kind, its plural, or plural.group (case-insensitive). */
export function selectKinds(kinds: readonly KindSource[], wanted: string): KindSource[] {
  const w = wanted.toLowerCase();
  return kinds.filter((k) => k.kind.toLowerCase() === w || k.plural === w || `${k.plural}.${k.group}` === w);
}

/** Import `file` and return the YAML of its kinds' CRDs (all, or those `--kind` selects). */
export async function crdYamlOf(file: string, opts: { kind?: string } = {}): Promise<string> {
  const path = resolve(file);
  if (!existsSync(path) || !statSync(path).isFile())
    throw new UsageError(
      `${file}: no such file; pass the module that exports your kinds, e.g. src/api/v1/widget.ts`,
    );
  let mod: Record<string, unknown>;
  try {
    mod = (await import(pathToFileURL(path).href)) as Record<string, unknown>;
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const hint =
      isRecord(err) && err.code === "ERR_MODULE_NOT_FOUND" && /'opkit'/.test(message)
        ? " (the module imports opkit but none is installed where it lives: run this inside its project, or npm install opkit there)"
        : "";
    throw new UsageError(`could not import ${file}: ${message}${hint}`);
  }
  const kinds = kindsOf(mod);
  if (kinds.length === 0) {
    throw new UsageError(
      `${file} exports no kinds: export the result of defineKind(...) (or defineKindVersions, or an operator made with defineOperator)`,
    );
  }
  const chosen = opts.kind === undefined ? kinds : selectKinds(kinds, opts.kind);
  if (chosen.length === 0) {
    throw new UsageError(
      `--kind ${opts.kind}: ${file} exports no such kind; it exports ${kinds.map(nameOf).join(", ")}`,
    );
  }
  return crdYaml(chosen);
}

/** The `crd` subcommand of `opkit generate`. */
export function crdCommand(): Command {
  return new Command("crd")
    .description(
      "print the CRDs of the kinds a module exports (YAML, `---` between documents); the module is imported, so its top-level code runs",
    )
    .argument("<file>", "module that exports kinds (defineKind), e.g. src/api/v1alpha1/memcached.ts")
    .option("--kind <kind>", "only this kind (name, plural or plural.group)")
    .action(async (file: string, o: { kind?: string }) => {
      process.stdout.write(await crdYamlOf(file, o));
    });
}
