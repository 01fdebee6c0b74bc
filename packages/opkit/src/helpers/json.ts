/**
 * JSON value helpers shared by the status, apply and children helpers. Objects here are what travels
 * over the wire, so equality and diffs are defined on their JSON form: a property holding `undefined`
 * is the same as an absent one, because JSON.stringify drops both alike.
 */
import { isDeepStrictEqual } from "node:util";

/** A value that survives JSON unchanged: what object fields, patches and status values are made of. */
export type JsonValue = null | boolean | number | string | JsonValue[] | { [key: string]: JsonValue };

/** The value as the API server would receive it: undefined properties gone, Dates as strings. */
export function toJson(value: unknown): JsonValue | undefined {
  return value === undefined ? undefined : (JSON.parse(JSON.stringify(value)) as JsonValue);
}

/** Equal as JSON documents (what the API server would store for each). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  return isDeepStrictEqual(toJson(a), toJson(b));
}

function isPlainObject(v: unknown): v is Record<string, JsonValue> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * An RFC 7386 JSON merge patch that turns `from` into `to`: changed and added keys with their new
 * values, removed keys as `null`, arrays replaced whole. Returns undefined when nothing differs.
 * A `null` inside `to` cannot be expressed (merge patch reads it as "delete"); Kubernetes objects do
 * not rely on explicit nulls, so that is acceptable here.
 */
export function mergePatchDiff(from: unknown, to: unknown): JsonValue | undefined {
  const a = toJson(from);
  const b = toJson(to);
  if (isDeepStrictEqual(a, b)) return undefined;
  if (!isPlainObject(a) || !isPlainObject(b)) return b ?? null;
  const patch: Record<string, JsonValue> = {};
  for (const key of Object.keys(a)) {
    if (!(key in b)) patch[key] = null;
  }
  for (const [key, value] of Object.entries(b)) {
    const sub = mergePatchDiff(a[key], value);
    if (sub !== undefined) patch[key] = sub;
  }
  return patch;
}
