/**
 * Fields a version cannot hold, kept across a conversion in an annotation, as the Kubernetes API does for
 * its own lossy conversions: converting away from a version stashes the declared fields' values in
 * `conversion.opkit.dev/<version>`, and converting back restores them and removes the annotation, so the
 * round trip is exact.
 *
 * Users can edit annotations, so a restored value is checked against the target version's schema and
 * dropped when it does not fit (the conversion itself never fails on it: an object that cannot be converted
 * cannot be read at all).
 */
import type { KubeObject } from "../client/types.ts";
import { WebhookDefinitionError } from "./admission.ts";

/** The prefix of the annotations that carry preserved fields; the version follows the slash. */
export const PRESERVED_ANNOTATION_PREFIX = "conversion.opkit.dev/";

/** The annotation holding the fields of `version` that another version cannot hold. */
export function preservedAnnotation(version: string): string {
  return `${PRESERVED_ANNOTATION_PREFIX}${version}`;
}

/** A declared field path split into its keys, e.g. `.spec.database.port` → ["spec", "database", "port"]. */
export type FieldPath = readonly string[];

const PATH = /^\.(spec|status)(\.[A-Za-z0-9_-]+)+$/;

/** Parses the declared paths of one spoke; a malformed one is a definition error naming it. */
export function parseFieldPaths(paths: readonly string[] | undefined, where: string): FieldPath[] {
  return (paths ?? []).map((p) => {
    if (!PATH.test(p))
      throw new WebhookDefinitionError(
        `${where}: field path "${p}" must be a dotted path into spec or status, e.g. ".spec.database.port"`,
      );
    return p.slice(1).split(".");
  });
}

/** A schema check of a whole object: the issues' paths are dotted from the root (`spec.a.b`). */
export type ObjectValidator = (obj: unknown) => readonly { path: string }[];

/** Stashes the values `paths` have in `source` on `target`'s annotation for `version` (or removes it when none). */
export function stash(
  source: KubeObject,
  paths: readonly FieldPath[],
  target: KubeObject,
  version: string,
): void {
  if (paths.length === 0) return;
  const values: Record<string, unknown> = {};
  for (const path of paths) {
    const value = read(source, path);
    if (value !== undefined) values[`.${path.join(".")}`] = value;
  }
  const key = preservedAnnotation(version);
  if (Object.keys(values).length === 0) return removeAnnotation(target, key);
  target.metadata ??= {};
  target.metadata.annotations = { ...target.metadata.annotations, [key]: JSON.stringify(values) };
}

/**
 * Restores on `target` the declared fields found in its annotation for `version`, then removes the
 * annotation. Values that do not fit the target's schema (`validate`) are dropped.
 */
export function restore(
  target: KubeObject,
  paths: readonly FieldPath[],
  version: string,
  validate?: ObjectValidator,
): void {
  const key = preservedAnnotation(version);
  const raw = target.metadata?.annotations?.[key];
  removeAnnotation(target, key);
  if (raw === undefined || paths.length === 0) return;
  let values: unknown;
  try {
    values = JSON.parse(raw);
  } catch {
    return; // edited into something that is not JSON: nothing can be restored from it
  }
  if (values === null || typeof values !== "object" || Array.isArray(values)) return;
  const restored: FieldPath[] = [];
  for (const path of paths) {
    const value = (values as Record<string, unknown>)[`.${path.join(".")}`];
    if (value === undefined) continue;
    write(target, path, structuredClone(value));
    restored.push(path);
  }
  if (!validate || restored.length === 0) return;
  const issues = validate(target);
  for (const path of restored) {
    const dotted = path.join(".");
    if (
      issues.some(
        (i) => i.path === dotted || i.path.startsWith(`${dotted}.`) || i.path.startsWith(`${dotted}[`),
      )
    )
      remove(target, path);
  }
}

function removeAnnotation(obj: KubeObject, key: string): void {
  const annotations = obj.metadata?.annotations;
  if (!annotations || !(key in annotations)) return;
  const { [key]: _gone, ...rest } = annotations;
  if (Object.keys(rest).length === 0) delete obj.metadata?.annotations;
  else if (obj.metadata) obj.metadata.annotations = rest;
}

function read(obj: unknown, path: FieldPath): unknown {
  let node: unknown = obj;
  for (const key of path) {
    if (node === null || typeof node !== "object" || Array.isArray(node)) return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

function write(obj: KubeObject, path: FieldPath, value: unknown): void {
  let node = obj as unknown as Record<string, unknown>;
  for (const key of path.slice(0, -1)) {
    const next = node[key];
    if (next === null || typeof next !== "object" || Array.isArray(next)) node[key] = {};
    node = node[key] as Record<string, unknown>;
  }
  node[path[path.length - 1] as string] = value;
}

function remove(obj: KubeObject, path: FieldPath): void {
  const parent = read(obj, path.slice(0, -1));
  if (parent !== null && typeof parent === "object")
    delete (parent as Record<string, unknown>)[path[path.length - 1] as string];
}
