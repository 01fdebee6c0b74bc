/**
 * Predicates filter events before they reach the queue. The shipped ones match controller-runtime's:
 * generation changed (ignores status-only and metadata-only writes, which is what stops a controller
 * from re-triggering itself when it writes status), annotations/labels/resourceVersion changed, a label
 * selector, and and/or/not to combine them.
 */
import { labelMatcher } from "../client/labels.ts";
import type { DeepReadonly, KubeObject } from "../client/types.ts";

/** Filters events of one kind; objects are the cache's own (read-only). A missing method lets events through. */
export interface Predicate<T extends KubeObject = KubeObject> {
  /** Whether a create event (or an object of the initial list) passes. */
  create?(obj: DeepReadonly<T>): boolean;
  /** Whether an update event passes; gets the old and the new object. */
  update?(oldObj: DeepReadonly<T>, newObj: DeepReadonly<T>): boolean;
  /** Whether a delete event passes. */
  delete?(obj: DeepReadonly<T>): boolean;
}

/** Which kind of event a predicate is asked about. */
export type EventKind = "create" | "update" | "delete";

/** Evaluate one predicate for an event; a predicate without a method for that event lets it through. */
export function allows<T extends KubeObject>(
  p: Predicate<T>,
  kind: EventKind,
  obj: DeepReadonly<T>,
  oldObj?: DeepReadonly<T>,
): boolean {
  switch (kind) {
    case "create":
      return p.create ? p.create(obj) : true;
    case "update":
      return p.update ? p.update(oldObj ?? obj, obj) : true;
    case "delete":
      return p.delete ? p.delete(obj) : true;
  }
}

const onUpdate = <T extends KubeObject>(
  fn: (o: DeepReadonly<T>, n: DeepReadonly<T>) => boolean,
): Predicate<T> => ({ update: fn });

function sameRecord(
  a: Readonly<Record<string, string>> | undefined,
  b: Readonly<Record<string, string>> | undefined,
): boolean {
  const ka = Object.keys(a ?? {});
  if (ka.length !== Object.keys(b ?? {}).length) return false;
  return ka.every((k) => a?.[k] === b?.[k]);
}

/**
 * Pass updates only when `metadata.generation` changed, i.e. the spec changed: a controller that writes its
 * own status is not woken by that write. Creates and deletes pass.
 */
export const generationChanged = <T extends KubeObject>(): Predicate<T> =>
  onUpdate((o, n) => o.metadata.generation !== n.metadata.generation);

/**
 * Pass updates only when the annotations changed, e.g. for controllers driven by annotations; combine with
 * `or(generationChanged(), ...)`.
 */
export const annotationsChanged = <T extends KubeObject>(): Predicate<T> =>
  onUpdate((o, n) => !sameRecord(o.metadata.annotations, n.metadata.annotations));

/** Pass updates only when the labels changed. */
export const labelsChanged = <T extends KubeObject>(): Predicate<T> =>
  onUpdate((o, n) => !sameRecord(o.metadata.labels, n.metadata.labels));

/**
 * Pass updates only when the resourceVersion changed: drops the periodic resyncs but keeps every real change.
 */
export const resourceVersionChanged = <T extends KubeObject>(): Predicate<T> =>
  onUpdate((o, n) => o.metadata.resourceVersion !== n.metadata.resourceVersion);

/** Only objects whose labels match (both versions are checked on update: leaving the selection counts). */
export function labelSelectorPredicate<T extends KubeObject>(selector: string): Predicate<T> {
  const m = labelMatcher(selector);
  return {
    create: (o) => m(o.metadata.labels),
    update: (o, n) => m(o.metadata.labels) || m(n.metadata.labels),
    delete: (o) => m(o.metadata.labels),
  };
}

/** Pass an event only when every predicate passes it. */
export function and<T extends KubeObject>(...ps: Predicate<T>[]): Predicate<T> {
  return {
    create: (o) => ps.every((p) => allows(p, "create", o)),
    update: (o, n) => ps.every((p) => allows(p, "update", n, o)),
    delete: (o) => ps.every((p) => allows(p, "delete", o)),
  };
}

/** Pass an event when any predicate passes it, e.g. `or(generationChanged(), labelsChanged())`. */
export function or<T extends KubeObject>(...ps: Predicate<T>[]): Predicate<T> {
  return {
    create: (o) => ps.some((p) => allows(p, "create", o)),
    update: (o, n) => ps.some((p) => allows(p, "update", n, o)),
    delete: (o) => ps.some((p) => allows(p, "delete", o)),
  };
}

/** Pass exactly the events `p` would drop. */
export function not<T extends KubeObject>(p: Predicate<T>): Predicate<T> {
  return {
    create: (o) => !allows(p, "create", o),
    update: (o, n) => !allows(p, "update", n, o),
    delete: (o) => !allows(p, "delete", o),
  };
}
