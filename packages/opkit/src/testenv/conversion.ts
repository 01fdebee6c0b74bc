/**
 * `checkConversion`: proves a conversion webhook lossless with generated objects, without a cluster. For
 * every spoke, objects generated from the spoke's schema must come back unchanged from spoke → hub → spoke,
 * and objects generated from the hub's schema unchanged from hub → spoke → hub. A failure names the field
 * that changed and how to declare it when the other version cannot hold it (`spokeOnly` / `hubOnly`).
 *
 * fast-check is loaded only when this runs: the user's project has it as a dev dependency.
 */
import { isDeepStrictEqual } from "node:util";
import type * as FastCheck from "fast-check";
import type { KubeObject } from "../client/types.ts";
import { schemaFor } from "../generate/crd.ts";
import type { JSONSchemaProps } from "../generate/crd-types.ts";
import type { KindDefinition } from "../api/kind.ts";
import { PRESERVED_ANNOTATION_PREFIX } from "../webhook/preserve.ts";
import type { ConversionKind, ConversionWebhook } from "../webhook/conversion.ts";
import { arbitraryOf } from "./arbitrary.ts";

/** How many objects `checkConversion` tries, and how to repeat a failing run. */
export interface ConversionCheckOptions {
  /** Objects generated per direction and spoke (default 200). */
  numRuns?: number;
  /** The seed of a failing run, printed in its error, to reproduce it. */
  seed?: number;
}

/** A conversion that does not come back unchanged: names the versions, the field and the object. */
export class ConversionRoundTripError extends Error {
  /** The version the object started in. */
  readonly from: string;
  /** The version it was converted through. */
  readonly via: string;
  /** The first field that differs after the round trip, e.g. `.spec.database.port`. */
  readonly path: string;
  /** The (shrunk) object that failed. */
  readonly object: unknown;
  constructor(message: string, details: { from: string; via: string; path: string; object: unknown }) {
    super(message);
    this.name = "ConversionRoundTripError";
    this.from = details.from;
    this.via = details.via;
    this.path = details.path;
    this.object = details.object;
  }
}

/** The conversion's kinds are not `defineKind` results, so there is no schema to generate objects from. */
export class ConversionCheckError extends Error {
  /** Always "ConversionCheckError". */
  override name = "ConversionCheckError";
}

/**
 * Checks that every spoke of `webhook` round-trips through the hub, and the hub through every spoke, for
 * generated objects; throws a `ConversionRoundTripError` naming the first field that changed.
 */
export async function checkConversion(
  webhook: ConversionWebhook,
  options: ConversionCheckOptions = {},
): Promise<void> {
  const fc = await loadFastCheck();
  const hub = definitionOf(webhook.hub);
  for (const spokeKind of webhook.spokes) {
    const spoke = definitionOf(spokeKind);
    roundTrips(fc, webhook, spoke, hub, options);
    roundTrips(fc, webhook, hub, spoke, options);
  }
}

async function loadFastCheck(): Promise<typeof FastCheck> {
  try {
    return await import("fast-check");
  } catch (err) {
    throw new ConversionCheckError(
      `checkConversion needs fast-check: add it to the project's devDependencies (npm i -D fast-check)`,
      {
        cause: err,
      },
    );
  }
}

function definitionOf(kind: ConversionKind): KindDefinition {
  const def = kind as Partial<KindDefinition>;
  if (typeof def.validate !== "function" || def.spec === undefined)
    throw new ConversionCheckError(
      `checkConversion: ${kind.apiVersion} ${kind.kind} is not a defineKind(...) result, so it has no schema to generate objects from`,
    );
  return def as KindDefinition;
}

/** One direction: objects of `from` converted to `via` and back must be unchanged. */
function roundTrips(
  fc: typeof FastCheck,
  webhook: ConversionWebhook,
  from: KindDefinition,
  via: KindDefinition,
  options: ConversionCheckOptions,
): void {
  // Generated objects go through JSON too: fast-check may build them without a prototype.
  const objects = objectsOf(fc, from).map((o) => JSON.parse(JSON.stringify(o)) as KubeObject);
  // Each conversion's answer travels as JSON to the API server, so keys set to undefined do not count.
  const asJson = (obj: KubeObject): KubeObject => JSON.parse(JSON.stringify(obj)) as KubeObject;
  const trip = (obj: KubeObject): KubeObject =>
    asJson(webhook.convert(asJson(webhook.convert(obj, via.apiVersion)), from.apiVersion));
  const result = fc.check(
    fc.property(objects, (obj) => isDeepStrictEqual(trip(structuredClone(obj)), obj)),
    { numRuns: options.numRuns ?? 200, ...(options.seed === undefined ? {} : { seed: options.seed }) },
  );
  if (!result.failed) return;
  const obj = (result.counterexample?.[0] ?? {}) as KubeObject;
  const chain = `${from.version} → ${via.version} → ${from.version}`;
  let back: KubeObject;
  try {
    back = trip(structuredClone(obj));
  } catch (err) {
    throw new ConversionRoundTripError(
      `${from.kind} ${chain}: the conversion threw for a valid ${from.version} object: ${(err as Error).message}\n  object: ${JSON.stringify(obj)}\n  seed: ${result.seed}`,
      {
        from: from.version,
        via: via.version,
        path: "",
        object: obj,
      },
    );
  }
  const path = firstDifference(obj, back, "") ?? "";
  const was = JSON.stringify(valueAt(obj, path)) ?? "absent";
  const is = JSON.stringify(valueAt(back, path)) ?? "absent";
  const declare =
    from.version === webhook.hub.version
      ? `hubOnly of the ${via.version} spoke`
      : `spokeOnly of the ${from.version} spoke`;
  throw new ConversionRoundTripError(
    `${from.kind} ${chain} is not lossless: ${path || "the object"} was ${was}, came back ${is}. ` +
      `If ${via.version} cannot hold the field, declare ["${path}"] in ${declare}, and opkit keeps it in an annotation across the trip.\n` +
      `  object: ${JSON.stringify(obj)}\n  seed: ${result.seed}`,
    { from: from.version, via: via.version, path, object: obj },
  );
}

/** Objects of a version: generated spec and status, with metadata that conversions must keep. */
function objectsOf(fc: typeof FastCheck, def: KindDefinition): FastCheck.Arbitrary<KubeObject> {
  const schema = schemaFor(def);
  const spec = arbitraryOf(fc, schema.properties?.spec as JSONSchemaProps);
  const status = schema.properties?.status ? arbitraryOf(fc, schema.properties.status) : undefined;
  const label = fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/);
  const annotations = fc
    .dictionary(label, fc.string({ maxLength: 8 }), { maxKeys: 2 })
    .filter((a) => Object.keys(a).every((k) => !k.startsWith(PRESERVED_ANNOTATION_PREFIX)));
  const metadata = fc.record(
    {
      name: label,
      namespace: fc.constant("default"),
      labels: fc.dictionary(label, label, { minKeys: 1, maxKeys: 2 }),
      annotations: annotations.filter((a) => Object.keys(a).length > 0),
    },
    { requiredKeys: ["name"] },
  );
  const body = status ? fc.record({ spec, status }, { requiredKeys: ["spec"] }) : fc.record({ spec });
  return fc
    .tuple(metadata, body)
    .map(([meta, b]) => ({ apiVersion: def.apiVersion, kind: def.kind, metadata: meta, ...b }));
}

/** The first path (`.spec.a.b`, `.spec.list[2]`) where two JSON values differ, or undefined when equal. */
function firstDifference(a: unknown, b: unknown, path: string): string | undefined {
  if (isDeepStrictEqual(a, b)) return undefined;
  if (Array.isArray(a) && Array.isArray(b)) {
    for (let i = 0; i < Math.max(a.length, b.length); i++) {
      const d = firstDifference(a[i], b[i], `${path}[${i}]`);
      if (d) return d;
    }
    return path;
  }
  if (isRecord(a) && isRecord(b)) {
    for (const key of new Set([...Object.keys(a), ...Object.keys(b)])) {
      const d = firstDifference(a[key], b[key], `${path}.${key}`);
      if (d) return d;
    }
    return path;
  }
  return path;
}

function valueAt(obj: unknown, path: string): unknown {
  let node = obj;
  for (const part of path.match(/[^.[\]]+/g) ?? []) {
    if (node === null || typeof node !== "object") return undefined;
    node = (node as Record<string, unknown>)[part];
  }
  return node;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
