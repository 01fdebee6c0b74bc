/**
 * An EventRecorder for `events.k8s.io/v1` Events with client-go's manners: a repeat of the same event
 * within a few minutes becomes a count on the first Event (`series`) instead of a new object, a
 * per-object token bucket drops bursts, and failures go to a callback, never to the reconcile: an
 * Event is a courtesy to humans, and losing one must not fail or slow the work it describes.
 */
import { Buffer } from "node:buffer";
import { hostname } from "node:os";
import type { KubeClient } from "../client/client.ts";
import { errorMessage, NotFoundError } from "../client/errors.ts";
import { kindRef, microTime, objectKey, type KubeObject, type ReadonlyKubeObject } from "../client/types.ts";
import { realClock, TokenBucket, type Clock } from "../clock/index.ts";

/**
 * "Normal" for progress users may want to see; "Warning" for something a user should act on (bad input, a
 * failing dependency).
 */
export type EventType = "Normal" | "Warning";

/**
 * A reference to the object an Event is about, with enough identity (uid, resourceVersion) that `kubectl
 * describe` finds it.
 */
export interface ObjectReference {
  /** The object's apiVersion. */
  apiVersion?: string;
  /** The object's kind. */
  kind?: string;
  /** The object's name. */
  name?: string;
  /** The object's namespace (absent for cluster-scoped objects). */
  namespace?: string;
  /** The object's uid. */
  uid?: string;
  /** The object's resourceVersion when the event happened. */
  resourceVersion?: string;
}

/** How often an Event repeated: the recorder counts repeats here instead of creating new Event objects. */
export interface EventSeries {
  /** Occurrences so far, counting the first. */
  count: number;
  /** MicroTime: RFC 3339 with microseconds. */
  lastObservedTime: string;
}

/** An `events.k8s.io/v1` Event. */
export interface EventV1 extends KubeObject {
  /** When the event first happened (MicroTime). */
  eventTime: string;
  /** Repeats of the same event, if any. */
  series?: EventSeries;
  /** The controller that reported it, e.g. "opkit.dev/webapp-controller". */
  reportingController: string;
  /** The replica that reported it. */
  reportingInstance: string;
  /** What was done or failed, e.g. "Reconcile". */
  action: string;
  /** Why, in CamelCase, e.g. "ReconcileError". */
  reason: string;
  /** The object the event is about. */
  regarding: ObjectReference;
  /** A second object involved, e.g. the child that failed. */
  related?: ObjectReference;
  /** Human-readable details (at most 1 kB). */
  note?: string;
  /** Normal or Warning. */
  type: EventType;
}

/** The kind reference for events.k8s.io/v1 Events, e.g. to list the Events an operator wrote in a test. */
export const EventsV1 = kindRef<EventV1>("events.k8s.io/v1", "Event");

/** Where Events go. The default writes them with a KubeClient; tests use a fake. */
export interface EventSink {
  /** Create a new Event. */
  create(event: EventV1): Promise<EventV1>;
  /** Update the series of an existing Event. */
  patchSeries(namespace: string, name: string, series: EventSeries): Promise<EventV1>;
}

/**
 * The EventSink that writes Events through a KubeClient (what the manager uses); its identity needs create
 * and patch on events.k8s.io events.
 */
export function clientEventSink(client: KubeClient): EventSink {
  return {
    create: (event) => client.create(event),
    patchSeries: (namespace, name, series) =>
      client.patch(EventsV1, name, { series }, { type: "merge", namespace }),
  };
}

/** One Event to record about an object: its type, reason, action and note. */
export interface EventInput {
  /** Normal or Warning; Warnings are what users look for when something is wrong. */
  type: EventType;
  /** CamelCase reason, e.g. "ReconcileError" (at most 128 characters). */
  reason: string;
  /** What was done or failed, e.g. "Reconcile", "Delete" (at most 128 characters). */
  action: string;
  /** Human-readable text (truncated to 1 kB as the API requires). */
  note?: string;
  /** A second object the event is about, e.g. the child that failed. */
  related?: ReadonlyKubeObject;
}

/**
 * How an `EventRecorder` identifies itself and throttles: the reporting controller and instance, the dedup
 * window and the per-object rate limit.
 */
export interface EventRecorderOptions {
  /** The controller's name, e.g. "opkit.dev/webapp-controller". */
  reportingController: string;
  /** This replica; default `<reportingController>-<hostname>` as client-go. */
  reportingInstance?: string;
  /** Times the dedup window and the rate limit; a FakeClock in tests. */
  clock?: Clock;
  /** Wall time for the timestamps written into Events. */
  now?: () => Date;
  /** Told about every Event that could not be written. Default: a process warning. */
  onError?: (err: unknown, event: EventV1) => void;
  /** Events per object allowed in a burst (client-go: 25). */
  burst?: number;
  /** One more event per object is allowed every this many ms (client-go: 5 minutes). */
  refillIntervalMs?: number;
  /** A repeat within this long of the last occurrence joins its series (client-go: 6 minutes). */
  dedupWindowMs?: number;
  /** How many series and rate-limit buckets to remember; the least recently used go first. */
  maxTracked?: number;
}

/** Counts of what a recorder did, for tests and diagnostics. */
export interface EventRecorderStats {
  /** Events created as new objects. */
  created: number;
  /** Repeats folded into an existing Event's series. */
  patched: number;
  /** Events dropped by the per-object rate limit. */
  dropped: number;
  /** Events that could not be written (reported to onError). */
  failed: number;
}

interface SeriesEntry {
  namespace: string;
  /** Name of the Event on the server; undefined until created (or after it vanished). */
  name: string | undefined;
  count: number;
  lastObserved: number;
  template: EventV1;
  /** Writes to one series run one after another so counts never go backwards on the server. */
  chain: Promise<void>;
}

const MAX_NOTE_BYTES = 1024;
const MAX_REASON_CHARS = 128;
const MAX_NAME_CHARS = 253;

/**
 * Records Kubernetes Events about objects, so users see in `kubectl describe` what the operator did and what
 * went wrong. Repeats are folded into a series, bursts are dropped, and failures never reach the caller:
 * recording an Event never fails or slows a reconcile. Controllers get one as `ctx.recorder`.
 */
export class EventRecorder {
  /** The controller name written into every Event. */
  readonly reportingController: string;
  /** The replica name written into every Event. */
  readonly reportingInstance: string;
  /** Counts of created, patched, dropped and failed Events so far. */
  readonly stats: EventRecorderStats = { created: 0, patched: 0, dropped: 0, failed: 0 };
  private readonly sink: EventSink;
  private readonly clock: Clock;
  private readonly now: () => Date;
  private readonly onError: (err: unknown, event: EventV1) => void;
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly windowMs: number;
  private readonly maxTracked: number;
  private readonly series = new Map<string, SeriesEntry>();
  private readonly buckets = new Map<string, TokenBucket>();
  private readonly inflight = new Set<Promise<void>>();
  private seq = 0;

  constructor(target: KubeClient | EventSink, opts: EventRecorderOptions) {
    this.sink = isSink(target) ? target : clientEventSink(target);
    this.reportingController = opts.reportingController;
    this.reportingInstance = (opts.reportingInstance ?? `${opts.reportingController}-${hostname()}`).slice(
      0,
      MAX_REASON_CHARS,
    );
    this.clock = opts.clock ?? realClock;
    this.now = opts.now ?? (() => new Date());
    this.onError =
      opts.onError ??
      ((err, event) =>
        process.emitWarning(
          `Event ${event.reason} about ${event.regarding.kind ?? ""} ${event.regarding.name ?? ""} not recorded: ${errorMessage(
            err,
          )}`,
        ));
    this.burst = opts.burst ?? 25;
    this.refillMs = opts.refillIntervalMs ?? 5 * 60_000;
    this.windowMs = opts.dedupWindowMs ?? 6 * 60_000;
    this.maxTracked = opts.maxTracked ?? 4096;
  }

  /**
   * Record an event about `regarding`. Resolves when the write finished or was dropped; never rejects,
   * so `void recorder.record(...)` is safe where the caller should not wait.
   */
  record(regarding: ReadonlyKubeObject, input: EventInput): Promise<void> {
    const p = this.recordOne(regarding, input);
    this.inflight.add(p);
    void p.finally(() => this.inflight.delete(p));
    return p;
  }

  /**
   * A view of this recorder (same de-duplication, limits and writes) that records nothing once `signal`
   * has aborted, e.g. a reconcile whose shard was lost: another replica may be reconciling its key.
   */
  until(signal: AbortSignal): EventRecorder {
    const view = Object.create(this) as EventRecorder;
    view.record = (regarding, input) => (signal.aborted ? Promise.resolve() : this.record(regarding, input));
    return view;
  }

  /** Wait for every write started so far (shutdown, tests). */
  async flush(): Promise<void> {
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  private async recordOne(regarding: ReadonlyKubeObject, input: EventInput): Promise<void> {
    const now = this.clock.now();
    const objectId = regarding.metadata.uid ?? `${regarding.kind ?? ""}/${objectKey(regarding)}`;
    const note = truncateBytes(input.note ?? "", MAX_NOTE_BYTES);
    const key = [
      objectId,
      input.type,
      input.reason,
      input.action,
      note,
      input.related?.metadata.uid ?? "",
    ].join("\u0000");
    if (!this.takeToken(objectId)) {
      this.stats.dropped++;
      return;
    }
    let entry = this.series.get(key);
    if (entry && now - entry.lastObserved > this.windowMs) {
      this.series.delete(key);
      entry = undefined;
    }
    if (!entry) {
      const template = this.build(regarding, input, note);
      const fresh: SeriesEntry = {
        namespace: template.metadata.namespace ?? "default",
        name: undefined,
        count: 1,
        lastObserved: now,
        template,
        chain: Promise.resolve(),
      };
      this.remember(this.series, key, fresh);
      entry = fresh;
    } else {
      entry.count++;
      entry.lastObserved = now;
      this.remember(this.series, key, entry);
    }
    const target = entry;
    const wallNow = this.now();
    target.chain = target.chain.then(() => this.write(target, wallNow));
    await target.chain;
  }

  /** Create the Event, or move its series forward; never throws. */
  private async write(entry: SeriesEntry, wallNow: Date): Promise<void> {
    const series: EventSeries | undefined =
      entry.count >= 2 ? { count: entry.count, lastObservedTime: microTime(wallNow) } : undefined;
    try {
      if (entry.name !== undefined && series) {
        try {
          await this.sink.patchSeries(entry.namespace, entry.name, series);
          this.stats.patched++;
          return;
        } catch (err) {
          // Events expire (the API server's event TTL, 1 h by default) while a series goes on: start over.
          if (!(err instanceof NotFoundError)) throw err;
          entry.name = undefined;
        }
      }
      if (entry.name !== undefined) return;
      const event: EventV1 = {
        ...entry.template,
        metadata: { ...entry.template.metadata, name: this.eventName(entry.template, wallNow) },
        eventTime: microTime(wallNow),
        ...(series ? { series } : {}),
      };
      const created = await this.sink.create(event);
      entry.name = created.metadata.name ?? event.metadata.name;
      this.stats.created++;
    } catch (err) {
      this.stats.failed++;
      try {
        this.onError(err, entry.template);
      } catch {
        // A throwing error callback must not turn into an unhandled rejection in the reconcile.
      }
    }
  }

  private build(regarding: ReadonlyKubeObject, input: EventInput, note: string): EventV1 {
    return {
      apiVersion: "events.k8s.io/v1",
      kind: "Event",
      metadata: { namespace: regarding.metadata.namespace || "default" },
      eventTime: "",
      reportingController: this.reportingController,
      reportingInstance: this.reportingInstance,
      action: input.action.slice(0, MAX_REASON_CHARS),
      reason: input.reason.slice(0, MAX_REASON_CHARS),
      regarding: referenceTo(regarding),
      ...(input.related ? { related: referenceTo(input.related) } : {}),
      note,
      type: input.type,
    };
  }

  /** client-go's `<regarding name>.<hex nanoseconds>`; the low digits count up so names never collide. */
  private eventName(template: EventV1, wallNow: Date): string {
    const nanos = BigInt(wallNow.getTime()) * 1_000_000n + BigInt(this.seq++ % 1_000_000);
    const suffix = `.${nanos.toString(16)}`;
    const base = (template.regarding.name ?? "event")
      .toLowerCase()
      .replace(/[^a-z0-9.-]/g, "-")
      .replace(/^[^a-z0-9]+/, "")
      .slice(0, MAX_NAME_CHARS - suffix.length);
    return `${base || "event"}${suffix}`;
  }

  /** Per-object token bucket: `burst` at once, then one per `refillIntervalMs`. */
  private takeToken(objectId: string): boolean {
    const bucket =
      this.buckets.get(objectId) ?? new TokenBucket({ intervalMs: this.refillMs }, this.burst, this.clock);
    this.remember(this.buckets, objectId, bucket);
    return bucket.tryTake();
  }

  /** Insert as most recently used and forget the least recently used beyond the limit. */
  private remember<V>(map: Map<string, V>, key: string, value: V): void {
    map.delete(key);
    map.set(key, value);
    while (map.size > this.maxTracked) {
      const oldest = map.keys().next();
      if (oldest.done) break;
      map.delete(oldest.value);
    }
  }
}

function isSink(target: KubeClient | EventSink): target is EventSink {
  return typeof (target as Partial<EventSink>).patchSeries === "function";
}

function referenceTo(obj: ReadonlyKubeObject): ObjectReference {
  const ref: ObjectReference = {
    apiVersion: obj.apiVersion,
    kind: obj.kind,
    name: obj.metadata.name,
    namespace: obj.metadata.namespace,
    uid: obj.metadata.uid,
    resourceVersion: obj.metadata.resourceVersion,
  };
  return JSON.parse(JSON.stringify(ref)) as ObjectReference;
}

function truncateBytes(s: string, max: number): string {
  if (Buffer.byteLength(s) <= max) return s;
  let out = "";
  let bytes = 0;
  for (const ch of s) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > max) break;
    out += ch;
    bytes += n;
  }
  return out;
}
