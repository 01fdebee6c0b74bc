/**
 * CRD conversion, hub and spoke (as controller-runtime does it): one version is the hub; every other
 * version (a spoke) converts to and from the hub. Any version reaches any other through the hub, so n
 * versions need 2(n-1) functions instead of n(n-1).
 *
 * Round-trip safety: `fromHub(toHub(x))` must equal `x` for every spoke object, and `toHub(fromHub(h))`
 * must equal `h` for every hub object. A field one side cannot hold is declared (`spokeOnly`, `hubOnly`)
 * and opkit keeps it in an annotation across the trip (preserve.ts). `checkConversion` (opkit/testenv)
 * proves both directions with generated objects; `roundTrip` converts one object there and back.
 *
 * opkit keeps what the API server requires of a conversion: apiVersion set to the desired version,
 * kind unchanged, metadata unchanged except labels and annotations, objects in the order received.
 */
import type { KindRef, KubeObject, ObjectMeta } from "../client/types.ts";
import { WebhookDefinitionError } from "./admission.ts";
import { parseFieldPaths, restore, stash, type FieldPath, type ObjectValidator } from "./preserve.ts";
import type { ConversionRequest, ConversionResponse } from "./review.ts";
import { errorMessage } from "../client/errors.ts";

/** What conversion needs to know of a version of the kind; `defineKind` results have all of it. */
export interface ConversionKind<T extends KubeObject = KubeObject> extends KindRef<T> {
  /** The kind's API group. */
  readonly group: string;
  /** This version's name, e.g. "v1beta1". */
  readonly version: string;
  /** The kind's plural (the CRD is `<plural>.<group>`). */
  readonly plural: string;
}

/**
 * What a conversion function returns: the object's body (spec, status, …) in the target version.
 * apiVersion and kind are set by opkit; of `metadata` only labels and annotations are taken (the API
 * server refuses conversions that change anything else).
 */
export type Converted<T extends KubeObject> = Omit<T, "apiVersion" | "kind" | "metadata"> & {
  /** Labels and annotations to set on the converted object; other metadata is kept as it was. */
  metadata?: Pick<ObjectMeta, "labels" | "annotations">;
};

/** One non-hub version and its two conversions. */
export interface SpokeDefinition<H extends KubeObject, S extends KubeObject> {
  /** The spoke version. */
  kind: ConversionKind<S>;
  /** Convert an object of this version to the hub version. */
  toHub(obj: S): Converted<H>;
  /** Convert a hub object to this version. */
  fromHub(hub: H): Converted<S>;
  /**
   * Fields of this version the hub cannot hold (dotted paths into spec or status, e.g. ".spec.legacyPort"):
   * opkit keeps their values in an annotation on the hub object and restores them on the way back, so the
   * round trip is exact. `toHub` need not copy them.
   */
  spokeOnly?: readonly string[];
  /**
   * Fields of the hub this version cannot hold: kept in an annotation on this version's objects and
   * restored when they are converted back to the hub. `fromHub` need not copy them.
   */
  hubOnly?: readonly string[];
}

/**
 * A conversion webhook declared hub-and-spoke (as kubebuilder): every version converts to and from one hub,
 * so n versions need 2(n-1) functions instead of n(n-1).
 */
export interface ConversionDefinition<H extends KubeObject, S extends readonly KubeObject[]> {
  /** The hub version (usually the storage version). */
  hub: ConversionKind<H>;
  /** Every other version with its conversions to and from the hub. */
  spokes: { [I in keyof S]: SpokeDefinition<H, S[I]> };
  /** URL path (default `/convert-<group>-<kind>`). */
  path?: string;
}

/** The conversion webhook of one kind. */
export interface ConversionWebhook {
  /** Always "conversion". */
  readonly type: "conversion";
  /** The URL path it is served on. */
  readonly path: string;
  /** `<plural>.<group>`: the CRD whose `spec.conversion` points at this webhook. */
  readonly crdName: string;
  /** The kind's API group. */
  readonly group: string;
  /** The kind name. */
  readonly kind: string;
  /** The hub version. */
  readonly hub: ConversionKind;
  /** The other versions. */
  readonly spokes: readonly ConversionKind[];
  /** Convert one object to `apiVersion` (throws ConversionError). */
  convert(obj: KubeObject, apiVersion: string): KubeObject;
  /** Answer a ConversionReview request; never throws (failures become `result.status: Failure`). */
  review(request: ConversionRequest): ConversionResponse;
}

/** A conversion that cannot be done; the message names the object and the versions. */
export class ConversionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ConversionError";
  }
}

type AnySpoke = SpokeDefinition<KubeObject, KubeObject>;

/** A spoke with its declared lossy fields parsed once, when the webhook is defined. */
interface Spoke {
  def: AnySpoke;
  spokeOnly: FieldPath[];
  hubOnly: FieldPath[];
}

/** The schema check of a kind definition, when the kind has one (`defineKind` results do). */
function validatorOf(kind: ConversionKind): ObjectValidator | undefined {
  const validate = (kind as { validate?: unknown }).validate;
  return typeof validate === "function" ? (validate.bind(kind) as ObjectValidator) : undefined;
}

function describe(obj: KubeObject): string {
  const m = obj.metadata ?? {};
  return `${obj.kind ?? "object"} ${m.namespace ? `${m.namespace}/` : ""}${m.name ?? "(unnamed)"}`;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function assemble(source: KubeObject, body: unknown, apiVersion: string, fn: string): KubeObject {
  if (!isRecord(body))
    throw new ConversionError(
      `${fn} returned ${body === null ? "null" : typeof body} for ${describe(source)}: return the object's body`,
    );
  const { apiVersion: _a, kind: _k, metadata, ...rest } = body;
  const meta: ObjectMeta = structuredClone(source.metadata ?? {});
  if (isRecord(metadata)) {
    if (metadata.labels !== undefined) meta.labels = metadata.labels as Record<string, string>;
    if (metadata.annotations !== undefined) meta.annotations = metadata.annotations as Record<string, string>;
    if (meta.labels && Object.keys(meta.labels).length === 0) delete meta.labels;
    if (meta.annotations && Object.keys(meta.annotations).length === 0) delete meta.annotations;
  }
  const out: KubeObject = { apiVersion, kind: source.kind, metadata: meta, ...structuredClone(rest) };
  return out;
}

/**
 * The conversion webhook for a kind with several versions: `hub` plus one `{ kind, toHub, fromHub }`
 * per other version. Each function gets the whole object of its version and returns the body of the
 * other (`{ spec, status }`, and labels/annotations under `metadata` when it keeps data there).
 */
export function conversion<H extends KubeObject, S extends readonly KubeObject[]>(
  def: ConversionDefinition<H, S>,
): ConversionWebhook {
  // Long on purpose: the hub/spoke checks and the `convert` closure over them read as one definition.
  const hub = def.hub as ConversionKind;
  const spokes = def.spokes as unknown as readonly AnySpoke[];
  if (!hub?.apiVersion || !hub.plural || !hub.group)
    throw new WebhookDefinitionError("conversion: hub must be a kind definition (defineKind(...))");
  if (!Array.isArray(def.spokes) || spokes.length === 0)
    throw new WebhookDefinitionError(
      `conversion(${hub.kind}): give at least one spoke: { kind, toHub, fromHub }`,
    );
  const byVersion = new Map<string, Spoke>();
  for (const s of spokes) {
    if (!s?.kind?.apiVersion || typeof s.toHub !== "function" || typeof s.fromHub !== "function")
      throw new WebhookDefinitionError(`conversion(${hub.kind}): every spoke needs kind, toHub and fromHub`);
    if (s.kind.kind !== hub.kind || s.kind.group !== hub.group || s.kind.plural !== hub.plural)
      throw new WebhookDefinitionError(
        `conversion(${hub.kind}): spoke ${s.kind.apiVersion} ${s.kind.kind} is not a version of ${hub.group} ${hub.kind}`,
      );
    if (s.kind.apiVersion === hub.apiVersion || byVersion.has(s.kind.apiVersion))
      throw new WebhookDefinitionError(`conversion(${hub.kind}): version ${s.kind.version} is given twice`);
    const where = `conversion(${hub.kind}) spoke ${s.kind.version}`;
    byVersion.set(s.kind.apiVersion, {
      def: s,
      spokeOnly: parseFieldPaths(s.spokeOnly, `${where} spokeOnly`),
      hubOnly: parseFieldPaths(s.hubOnly, `${where} hubOnly`),
    });
  }
  const path = def.path ?? `/convert-${hub.group.replace(/\./g, "-")}-${hub.kind.toLowerCase()}`;
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(path))
    throw new WebhookDefinitionError(
      `conversion(${hub.kind}): path "${path}" must start with "/" and be URL-safe`,
    );
  const known = [hub.apiVersion, ...byVersion.keys()];
  const hubValidator = validatorOf(hub);

  function convert(obj: KubeObject, apiVersion: string): KubeObject {
    const from = obj.apiVersion ?? "";
    if (from === apiVersion) return obj;
    for (const v of [from, apiVersion])
      if (!known.includes(v))
        throw new ConversionError(
          `cannot convert ${describe(obj)} from ${from} to ${apiVersion}: ${v} is not one of this webhook's versions (${known.join(", ")})`,
        );
    if (obj.kind !== hub.kind)
      throw new ConversionError(`cannot convert ${describe(obj)}: this webhook converts ${hub.kind} only`);
    const call = (fn: "toHub" | "fromHub", spoke: AnySpoke, input: KubeObject, to: string): KubeObject => {
      let body: unknown;
      try {
        body = spoke[fn](input);
      } catch (err) {
        throw new ConversionError(
          `${fn} of ${spoke.kind.version} failed for ${describe(input)}: ${errorMessage(err)}`,
          { cause: err },
        );
      }
      return assemble(input, body, to, `${fn} of ${spoke.kind.version}`);
    };
    const toHub = (spoke: Spoke, input: KubeObject): KubeObject => {
      const out = call("toHub", spoke.def, input, hub.apiVersion);
      stash(input, spoke.spokeOnly, out, spoke.def.kind.version);
      restore(out, spoke.hubOnly, hub.version, hubValidator);
      return out;
    };
    const fromHub = (spoke: Spoke, input: KubeObject): KubeObject => {
      const out = call("fromHub", spoke.def, input, spoke.def.kind.apiVersion);
      stash(input, spoke.hubOnly, out, hub.version);
      restore(out, spoke.spokeOnly, spoke.def.kind.version, validatorOf(spoke.def.kind));
      return out;
    };
    const source = byVersion.get(from);
    const hubObj = source ? toHub(source, obj) : obj;
    const target = byVersion.get(apiVersion);
    return target ? fromHub(target, hubObj) : hubObj;
  }

  return Object.freeze({
    type: "conversion" as const,
    path,
    crdName: `${hub.plural}.${hub.group}`,
    group: hub.group,
    kind: hub.kind,
    hub,
    spokes: spokes.map((s) => s.kind),
    convert,
    review(req: ConversionRequest): ConversionResponse {
      try {
        const convertedObjects = req.objects.map((o) => convert(o, req.desiredAPIVersion));
        return { uid: req.uid, convertedObjects, result: { status: "Success" } };
      } catch (err) {
        return {
          uid: req.uid,
          convertedObjects: [],
          result: { status: "Failure", message: errorMessage(err) },
        };
      }
    },
  });
}

/**
 * Convert `obj` to `via` and back to its own version: what a round-trip test compares with the
 * original (they must be deep-equal for conversion to be safe).
 */
export function roundTrip(webhook: ConversionWebhook, obj: KubeObject, via: string): KubeObject {
  const from = obj.apiVersion ?? "";
  return webhook.convert(webhook.convert(obj, via), from);
}
