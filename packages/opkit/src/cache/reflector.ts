/**
 * The reflector keeps a local copy of one kind in step with the API server: an explicit state machine
 *
 *   listing ──► watching ──(stream ends)──► watching (same resourceVersion)
 *      ▲            │
 *      │        410 Gone ──► listing (relist; objects missing from it become deletes)
 *      └──── error/429 ──► backoff ──► watching (or listing, if no list succeeded yet)
 *
 * with client-go's guarantees: a paged list (or a streaming list where the server supports it) then a
 * watch from its resourceVersion with bookmarks; every event and bookmark advances the resourceVersion;
 * watch timeouts random in [5, 10) minutes; a stream silent past its timeout is treated as dead; errors
 * back off (800 ms → 30 s, reset after 2 min healthy); a Forbidden list/watch is reported once.
 */
import type { KubeClient } from "../client/client.ts";
import {
  BadRequestError,
  ForbiddenError,
  GoneError,
  InvalidError,
  UnauthorizedError,
} from "../client/errors.ts";
import type { KindRef, KubeObject, WatchEvent } from "../client/types.ts";
import { realClock, type Clock } from "../clock/index.ts";
import { Backoff } from "./backoff.ts";

export type ReflectorState = "idle" | "listing" | "watching" | "backoff" | "stopped";

export interface ReflectorOptions<T extends KubeObject> {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  metadataOnly?: boolean;
  /** Use the streaming initial list (sendInitialEvents) when the server supports it (default true). */
  streamingList?: boolean;
  /** Page size of the initial list (default 500). */
  pageSize?: number;
  /** Applied to every object before it is stored (default: drop metadata.managedFields). */
  transform?: (obj: T) => T;
  clock?: Clock;
  random?: () => number;
  /** Watch timeout range in seconds (default [300, 600)). */
  minWatchTimeoutSeconds?: number;
}

export interface ReflectorSink<T extends KubeObject> {
  /** A complete list: the store content is replaced at once. */
  replace(items: T[], resourceVersion: string): void;
  event(type: "ADDED" | "MODIFIED" | "DELETED", obj: T): void;
  /** A bookmark or event advanced the resourceVersion. */
  progress(resourceVersion: string): void;
  error(err: unknown, state: ReflectorState): void;
  state(state: ReflectorState): void;
}

const INITIAL_EVENTS_END = "k8s.io/initial-events-end";

/** A watch timeout in [min, 2·min) seconds (client-go: [5, 10) minutes), so reconnects spread out. */
export function watchTimeoutSeconds(minSeconds: number, random: () => number = Math.random): number {
  // min + floor(min·r), not floor(min·(1 + r)): the latter rounds up to 2·min for r just below 1.
  return minSeconds + Math.floor(minSeconds * random());
}

export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata.managedFields) delete obj.metadata.managedFields;
  return obj;
}

export class Reflector<T extends KubeObject> {
  readonly kind: KindRef<T>;
  private readonly client: KubeClient;
  private readonly opts: ReflectorOptions<T>;
  private readonly sink: ReflectorSink<T>;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly backoff: Backoff;
  private abort = new AbortController();
  private streaming: boolean;
  private running: Promise<void> | undefined;
  /** Watch requests opened, for tests and metrics: a reconnect loop shows up here. */
  watchRequests = 0;
  listRequests = 0;
  /** Times the reflector had to list again after its first sync (410 Gone, or a failed resume). */
  relists = 0;
  private listedOnce = false;

  constructor(client: KubeClient, kind: KindRef<T>, sink: ReflectorSink<T>, opts: ReflectorOptions<T> = {}) {
    this.client = client;
    this.kind = kind;
    this.sink = sink;
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
    this.backoff = new Backoff({ clock: this.clock, random: this.random });
    this.streaming = opts.streamingList ?? true;
  }

  start(): void {
    this.running ??= this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
    this.sink.state("stopped");
  }

  private get stopped(): boolean {
    return this.abort.signal.aborted;
  }

  private transform(obj: T): T {
    return (this.opts.transform ?? stripManagedFields)(obj);
  }

  /** Random in [min, 2·min) seconds, so thousands of clients do not reconnect together. */
  private watchTimeoutSeconds(): number {
    return watchTimeoutSeconds(this.opts.minWatchTimeoutSeconds ?? 300, this.random);
  }

  private async run(): Promise<void> {
    let rv: string | undefined;
    while (!this.stopped) {
      const state: ReflectorState = rv === undefined ? "listing" : "watching";
      try {
        if (rv === undefined) {
          if (this.listedOnce) this.relists++;
          this.sink.state("listing");
          rv = this.streaming ? await this.streamingList() : await this.list();
          if (rv === undefined) continue; // streaming refused: fall back to a list at once
          this.listedOnce = true;
        } else {
          this.sink.state("watching");
          const started = this.clock.now();
          const { resourceVersion, events } = await this.watch(rv);
          rv = resourceVersion;
          // A stream the server ends at once with nothing in it, over and over, must not spin.
          if (events === 0 && this.clock.now() - started < 1_000) {
            this.sink.state("backoff");
            await this.backoff.wait(this.abort.signal);
          }
        }
      } catch (err) {
        if (this.stopped) break;
        if (err instanceof GoneError) {
          rv = undefined; // our resourceVersion is too old: relist (missing objects become deletes)
          continue;
        }
        this.sink.error(err, state);
        this.sink.state("backoff");
        await this.backoff.wait(this.abort.signal);
      }
    }
  }

  /** Paged list; replaces the store; returns the list's resourceVersion. */
  private async list(): Promise<string> {
    const items: T[] = [];
    let cont: string | undefined;
    let rv = "";
    do {
      this.listRequests++;
      const page = await this.client.list(this.kind, {
        namespace: this.opts.namespace,
        labelSelector: this.opts.labelSelector,
        fieldSelector: this.opts.fieldSelector,
        metadataOnly: this.opts.metadataOnly,
        limit: this.opts.pageSize ?? 500,
        continue: cont,
        signal: this.abort.signal,
      });
      if (!cont) rv = page.metadata.resourceVersion ?? "";
      for (const item of page.items) {
        // Lists omit apiVersion/kind on items; restore them so cached objects are complete.
        item.apiVersion ??= this.kind.apiVersion;
        item.kind ??= this.kind.kind;
        items.push(this.transform(item));
      }
      cont = page.metadata.continue || undefined;
    } while (cont);
    this.sink.replace(items, rv);
    return rv;
  }

  /**
   * Streaming initial list: a watch with sendInitialEvents delivers every object as ADDED, then a
   * bookmark marked initial-events-end; the buffered objects replace the store at once and the same
   * stream goes on as a normal watch. Returns undefined when the server refuses it (fallback to list).
   */
  private async streamingList(): Promise<string | undefined> {
    const buffer = new Map<string, T>();
    let synced = false;
    let rv = "";
    try {
      this.watchRequests++;
      const events = await this.client.watch(this.kind, {
        ...this.selectors(),
        sendInitialEvents: true,
        allowWatchBookmarks: true,
        timeoutSeconds: this.watchTimeoutSeconds(),
        signal: this.abort.signal,
      });
      for await (const ev of events) {
        rv = ev.object.metadata.resourceVersion ?? rv;
        if (!synced) {
          if (ev.type === "BOOKMARK") {
            if (ev.object.metadata.annotations?.[INITIAL_EVENTS_END] === "true") {
              synced = true;
              this.sink.replace([...buffer.values()], rv);
            }
            continue;
          }
          const obj = this.complete(ev.object);
          const key = `${obj.metadata.namespace ?? ""}/${obj.metadata.name ?? ""}`;
          if (ev.type === "DELETED") buffer.delete(key);
          else buffer.set(key, obj);
          continue;
        }
        this.deliver(ev);
      }
    } catch (err) {
      if (this.stopped) return rv || undefined;
      if (!synced && (err instanceof BadRequestError || err instanceof InvalidError)) {
        this.streaming = false;
        return undefined;
      }
      if (synced && !(err instanceof GoneError)) {
        // The list part worked; resume as a plain watch from where the stream stopped.
        this.sink.error(err, "watching");
        return rv;
      }
      throw err;
    }
    if (!synced) {
      // The stream ended before the initial events did (e.g. a timeout on a huge list): list instead.
      this.streaming = false;
      return undefined;
    }
    return rv;
  }

  private selectors(): {
    namespace?: string;
    labelSelector?: string;
    fieldSelector?: string;
    metadataOnly?: boolean;
  } {
    return {
      namespace: this.opts.namespace,
      labelSelector: this.opts.labelSelector,
      fieldSelector: this.opts.fieldSelector,
      metadataOnly: this.opts.metadataOnly,
    };
  }

  private async watch(rv: string): Promise<{ resourceVersion: string; events: number }> {
    this.watchRequests++;
    const events = await this.client.watch(this.kind, {
      ...this.selectors(),
      resourceVersion: rv,
      allowWatchBookmarks: true,
      timeoutSeconds: this.watchTimeoutSeconds(),
      signal: this.abort.signal,
    });
    let count = 0;
    let last = rv;
    for await (const ev of events) {
      count++;
      last = ev.object.metadata.resourceVersion ?? last;
      this.deliver(ev);
    }
    return { resourceVersion: last, events: count };
  }

  private complete(obj: T): T {
    obj.apiVersion ??= this.kind.apiVersion;
    obj.kind ??= this.kind.kind;
    return this.transform(obj);
  }

  private deliver(ev: WatchEvent<T>): void {
    const rv = ev.object.metadata.resourceVersion;
    if (ev.type === "BOOKMARK") {
      if (rv) this.sink.progress(rv);
      return;
    }
    if (ev.type === "ERROR") return; // parseWatchStream throws on ERROR; kept for exhaustiveness
    this.sink.event(ev.type, this.complete(ev.object));
    if (rv) this.sink.progress(rv);
  }
}

/** Errors that will not go away by retrying soon: reported once and surfaced in readiness. */
export function isPermissionError(err: unknown): err is ForbiddenError | UnauthorizedError {
  return err instanceof ForbiddenError || err instanceof UnauthorizedError;
}
