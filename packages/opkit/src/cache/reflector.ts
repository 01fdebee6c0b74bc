/**
 * The reflector keeps a local copy of one kind in step with the API server: an explicit state machine
 *
 *   listing ──► watching ──(stream ends or breaks)──► watching, resumed from the last event or bookmark
 *      ▲            │
 *      │        410 Gone ──► listing (relist; objects missing from it become deletes)
 *      └──── error/429 ──► backoff ──► watching (or listing, if no list succeeded yet)
 *
 * with client-go's guarantees: a list, decoded item by item as it arrives (paged when asked, or a streaming
 * watch-list where chosen and the server supports it), then a watch from its resourceVersion with bookmarks; every delivered event and bookmark advances the resume
 * point, so a watch that breaks mid-stream resumes where it stopped and no event is delivered twice;
 * watch timeouts random in [20, 40) seconds, so the server itself ends every healthy stream (with a
 * bookmark first when it has progressed) well within the 50 s progress deadline, and a stream without any byte
 * for that long is dead; errors back off (800 ms → 30 s, reset
 * after 2 min healthy), and so do relists that follow each other without a working watch in between; an
 * expired continue token (410 during a paged list) falls back to one unpaged list; a Forbidden
 * list/watch is reported once.
 *
 * Where it stands between rounds (first list, relist after 410, or watch from a resourceVersion, and the
 * relists in a row) is one value, a ReflectorPhase, changed only by `reflectorStep` (phase.ts).
 *
 * It talks to the server only through `list` and `watch`, so tests drive it with a fake server.
 */
import type { ListOptions, WatchOptions } from "../client/client.ts";
import {
  BadRequestError,
  ForbiddenError,
  GoneError,
  InvalidError,
  UnauthorizedError,
} from "../client/errors.ts";
import { ProtobufDecodeError } from "../client/protobuf/decode.ts";
import type { KindRef, KubeList, KubeObject, WatchEvent } from "../client/types.ts";
import { realClock, type Clock } from "../clock/index.ts";
import { Backoff } from "./backoff.ts";
import {
  INITIAL_PHASE,
  reflectorStep,
  resumePoint,
  type ReflectorInput,
  type ReflectorPhase,
} from "./phase.ts";

/**
 * What a list/watch loop is doing: idle (not started), listing, watching, backoff (waiting to retry after an
 * error), stopped.
 */
export type ReflectorState = "idle" | "listing" | "watching" | "backoff" | "stopped";

/** What the reflector needs of a client: list and watch (KubeClient fits; tests pass a fake server). */
export interface ListWatcher {
  /** List objects of a kind. */
  list<T extends KubeObject>(kind: KindRef<T>, opts?: ListOptions): Promise<KubeList<T>>;
  /** Open a watch stream of a kind. */
  watch<T extends KubeObject>(kind: KindRef<T>, opts?: WatchOptions): Promise<AsyncIterable<WatchEvent<T>>>;
}

export interface ReflectorOptions<T extends KubeObject> {
  namespace?: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** A KEP-5866 shard selector sent with every list and watch (honoured by servers with ShardedListAndWatch). */
  shardSelector?: string;
  metadataOnly?: boolean;
  /**
   * Use the streaming initial list (watch-list: a watch with sendInitialEvents) when the server supports it
   * (default false). Over JSON the API server encodes every object of a watch-list as its own watch event,
   * which cost it ~1.7× the CPU of one list answer for 10,000 Pods (client-go streams protobuf instead, where
   * the difference is small); a list answer is decoded item by item as it arrives, so neither path holds the
   * whole answer in memory.
   */
  streamingList?: boolean;
  /**
   * Page size of the list (default: one unpaged list, which an API server with its watch cache answers
   * from the cache, streamed item by item; client-go's reflector, listing at resourceVersion 0, gets the same
   * single answer). Set it to page, e.g. where lists come from etcd.
   */
  pageSize?: number;
  /** Applied to every object before it is stored (default: drop metadata.managedFields). */
  transform?: (obj: T) => T;
  clock?: Clock;
  random?: () => number;
  /**
   * Watch timeout range in seconds: [min, 2·min) (default min 20). client-go uses [5, 10) minutes and
   * notices dead connections with HTTP/2 pings; these watches run over HTTP/1.1, which has no ping, so a short
   * server timeout is what bounds the silence of a healthy stream. Reopening costs one request from the last
   * resourceVersion (no relist, nothing replayed), and the server sends a bookmark 2 s before the timeout
   * whenever its resourceVersion moved, so the resume point stays fresh.
   */
  minWatchTimeoutSeconds?: number;
  /**
   * A watch that delivers no byte for this long is dead (a frozen connection, a half-open socket): the pool's
   * connections are reset and the watch reopened from the last resourceVersion. Default: the longest watch
   * timeout plus 10 s (50 s with the default timeouts), since a healthy stream ends by then.
   */
  progressDeadlineMs?: number;
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
/** The default shortest watch timeout (seconds); each watch asks for a random one in [20, 40). */
export const DEFAULT_MIN_WATCH_TIMEOUT_SECONDS = 20;

/**
 * How long a watch may stay silent before it is treated as dead (50 s): the longest default watch timeout (the
 * server ends a healthy stream by then) plus 10 s of slack, so a frozen connection is noticed within a minute.
 */
export const DEFAULT_PROGRESS_DEADLINE_MS = progressDeadlineFor(DEFAULT_MIN_WATCH_TIMEOUT_SECONDS);

/** The silence after which a watch is dead: its longest timeout, 2·min seconds, plus 10 s. */
function progressDeadlineFor(minWatchTimeoutSeconds: number): number {
  return (2 * minWatchTimeoutSeconds + 10) * 1000;
}

/** A watch timeout in [min, 2·min) seconds (client-go: [5, 10) minutes), so reconnects spread out. */
export function watchTimeoutSeconds(minSeconds: number, random: () => number = Math.random): number {
  // min + floor(min·r), not floor(min·(1 + r)): the latter rounds up to 2·min for r just below 1.
  return minSeconds + Math.floor(minSeconds * random());
}

/**
 * The cache's default transform: drop metadata.managedFields, which is often the larger part of an object and
 * rarely read by controllers.
 */
export function stripManagedFields<T extends KubeObject>(obj: T): T {
  if (obj.metadata.managedFields) delete obj.metadata.managedFields;
  return obj;
}

export class Reflector<T extends KubeObject> {
  readonly kind: KindRef<T>;
  private readonly client: ListWatcher;
  private readonly opts: ReflectorOptions<T>;
  private readonly sink: ReflectorSink<T>;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly backoff: Backoff;
  private readonly relistBackoff: Backoff;
  private readonly abort = new AbortController();
  private streaming: boolean;
  private running: Promise<void> | undefined;
  /** What the next round does (first list, relist, or watch from the resume point); see phase.ts. */
  private phase: ReflectorPhase = INITIAL_PHASE;
  private readonly counts = { watchRequests: 0, listRequests: 0, relists: 0 };
  /** A protobuf list or watch of this kind could not be decoded (the client reads it as JSON since). */
  private protobufFailed = false;

  constructor(client: ListWatcher, kind: KindRef<T>, sink: ReflectorSink<T>, opts: ReflectorOptions<T> = {}) {
    this.client = client;
    this.kind = kind;
    this.sink = sink;
    this.opts = opts;
    this.clock = opts.clock ?? realClock;
    this.random = opts.random ?? Math.random;
    this.backoff = new Backoff({ clock: this.clock, random: this.random });
    this.relistBackoff = new Backoff({ clock: this.clock, random: this.random });
    this.streaming = opts.streamingList ?? false;
  }

  start(): void {
    this.running ??= this.run();
  }

  async stop(): Promise<void> {
    this.abort.abort();
    await this.running;
    this.sink.state("stopped");
  }

  /** The resourceVersion the next watch resumes from (undefined while a list is due). */
  get resumeResourceVersion(): string | undefined {
    return resumePoint(this.phase);
  }

  /** Watch requests opened, for tests and metrics: a reconnect loop shows up here. */
  get watchRequests(): number {
    return this.counts.watchRequests;
  }

  /** List requests sent (one per page). */
  get listRequests(): number {
    return this.counts.listRequests;
  }

  /** Times the reflector had to list again after its first sync (410 Gone). */
  get relists(): number {
    return this.counts.relists;
  }

  /** Apply one transition of the phase; returns the step (for a list: relist and back-off). */
  private step(input: ReflectorInput): ReturnType<typeof reflectorStep> {
    const step = reflectorStep(this.phase, input);
    this.phase = step.phase;
    return step;
  }

  private get stopped(): boolean {
    return this.abort.signal.aborted;
  }

  private transform(obj: T): T {
    return (this.opts.transform ?? stripManagedFields)(obj);
  }

  /** Random in [min, 2·min) seconds, so thousands of clients do not reconnect together. */
  private watchTimeoutSeconds(): number {
    return watchTimeoutSeconds(this.minWatchTimeoutSeconds(), this.random);
  }

  private minWatchTimeoutSeconds(): number {
    return this.opts.minWatchTimeoutSeconds ?? DEFAULT_MIN_WATCH_TIMEOUT_SECONDS;
  }

  /** The silence after which a stream is dead: given, or the longest watch timeout plus 10 s. */
  private progressDeadlineMs(): number {
    return this.opts.progressDeadlineMs ?? progressDeadlineFor(this.minWatchTimeoutSeconds());
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const phase = this.phase;
      const state: ReflectorState = phase.name === "watching" ? "watching" : "listing";
      try {
        if (phase.name !== "watching") {
          const { relist, backoffFirst } = this.step({ type: "listStarting" });
          if (relist) this.counts.relists++;
          // Relists in a row without a working watch between them (a 410 loop) must not spin.
          if (backoffFirst) {
            this.sink.state("backoff");
            await this.relistBackoff.wait(this.abort.signal);
            if (this.stopped) break;
          }
          this.sink.state("listing");
          const listed = this.streaming ? await this.streamingList() : await this.list();
          if (!listed) continue; // streaming refused: fall back to a list at once
        } else {
          this.sink.state("watching");
          const started = this.clock.now();
          const events = await this.watch(phase.resourceVersion);
          // A stream the server ends at once with nothing in it, over and over, must not spin.
          if (events === 0 && this.clock.now() - started < 1_000) {
            this.sink.state("backoff");
            await this.backoff.wait(this.abort.signal);
          }
        }
      } catch (err) {
        if (this.stopped) break;
        if (err instanceof GoneError) {
          this.step({ type: "gone" }); // too old: relist (missing objects become deletes)
          continue;
        }
        if (err instanceof ProtobufDecodeError && !this.protobufFailed) {
          // The client now reads this kind as JSON: list again at once (only once, so never a loop).
          this.protobufFailed = true;
          continue;
        }
        this.sink.error(err, state);
        this.sink.state("backoff");
        await this.backoff.wait(this.abort.signal);
      }
    }
  }

  private listOptions(): ListOptions {
    return {
      namespace: this.opts.namespace,
      labelSelector: this.opts.labelSelector,
      fieldSelector: this.opts.fieldSelector,
      shardSelector: this.opts.shardSelector,
      metadataOnly: this.opts.metadataOnly,
      signal: this.abort.signal,
    };
  }

  /**
   * The list (paged when `pageSize` is set); replaces the store. A continue token that expired between pages (410) falls back to
   * one unpaged list, as client-go's pager does, instead of starting the same paged list over.
   */
  private async list(): Promise<boolean> {
    let items: T[];
    let rv: string;
    try {
      ({ items, rv } = await this.pagedList(this.opts.pageSize));
    } catch (err) {
      if (!(err instanceof ExpiredContinueError) || this.stopped) throw err;
      ({ items, rv } = await this.pagedList(undefined));
    }
    this.sink.replace(items, rv);
    this.step({ type: "listed", resourceVersion: rv });
    return true;
  }

  private async pagedList(limit: number | undefined): Promise<{ items: T[]; rv: string }> {
    const items: T[] = [];
    let cont: string | undefined;
    let rv = "";
    do {
      this.counts.listRequests++;
      let page: KubeList<T>;
      try {
        // Items are decoded as they arrive (a client that ignores onItem returns them in the page instead).
        page = await this.client.list(this.kind, {
          ...this.listOptions(),
          limit,
          continue: cont,
          onItem: (item: T) => items.push(this.complete(item)),
          // The default transform drops them: skip them before decoding. It changes nothing else, so
          // what lies below each object may come frozen, as the store keeps it.
          omitManagedFields: this.opts.transform === undefined,
          freezeNested: this.opts.transform === undefined,
        });
      } catch (err) {
        if (cont && err instanceof GoneError) throw new ExpiredContinueError(err);
        throw err;
      }
      if (!cont) rv = page.metadata.resourceVersion ?? "";
      for (const item of page.items) items.push(this.complete(item));
      cont = page.metadata.continue || undefined;
    } while (cont);
    return { items, rv };
  }

  /**
   * Streaming initial list: a watch with sendInitialEvents delivers every object as ADDED, then a
   * bookmark marked initial-events-end; the buffered objects replace the store at once and the same
   * stream goes on as a normal watch. Returns false when the server refuses it (fallback to list).
   */
  private async streamingList(): Promise<boolean> {
    const buffer = new Map<string, T>();
    let synced = false;
    try {
      this.counts.watchRequests++;
      const events = await this.client.watch(this.kind, {
        ...this.listOptions(),
        sendInitialEvents: true,
        allowWatchBookmarks: true,
        timeoutSeconds: this.watchTimeoutSeconds(),
        idleTimeoutMs: this.progressDeadlineMs(),
        omitManagedFields: this.opts.transform === undefined,
        freezeNested: this.opts.transform === undefined,
      });
      for await (const ev of events) {
        if (!synced) {
          if (ev.type === "BOOKMARK") {
            if (ev.object.metadata.annotations?.[INITIAL_EVENTS_END] === "true") {
              synced = true;
              const rv = ev.object.metadata.resourceVersion ?? "";
              this.sink.replace([...buffer.values()], rv);
              buffer.clear();
              this.step({ type: "listed", resourceVersion: rv });
              // The same stream goes on as a plain watch.
              this.sink.state("watching");
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
      if (this.stopped) return synced;
      if (!synced && (err instanceof BadRequestError || err instanceof InvalidError)) {
        this.streaming = false;
        return false;
      }
      if (synced && !(err instanceof GoneError)) {
        // The list part worked; resume as a plain watch from the last event or bookmark delivered. A frame
        // the client could not decode is no failure the first time (it reads the kind as JSON since), as in `run`.
        if (err instanceof ProtobufDecodeError && !this.protobufFailed) this.protobufFailed = true;
        else this.sink.error(err, "watching");
        return true;
      }
      throw err;
    }
    if (!synced) {
      // The stream ended before the initial events did (e.g. a timeout on a huge list): list instead.
      this.streaming = false;
      return false;
    }
    return true;
  }

  /** One watch from `rv`; returns how many events it delivered. Throws what broke it. */
  private async watch(rv: string): Promise<number> {
    this.counts.watchRequests++;
    const events = await this.client.watch(this.kind, {
      ...this.listOptions(),
      resourceVersion: rv,
      allowWatchBookmarks: true,
      timeoutSeconds: this.watchTimeoutSeconds(),
      idleTimeoutMs: this.progressDeadlineMs(),
      // The default transform drops them: skip them before decoding (and see pagedList).
      omitManagedFields: this.opts.transform === undefined,
      freezeNested: this.opts.transform === undefined,
    });
    let count = 0;
    for await (const ev of events) {
      count++;
      this.deliver(ev);
    }
    return count;
  }

  /** Lists omit apiVersion/kind on items, and metadata-only answers name PartialObjectMetadata: stamp the real kind. */
  private complete(obj: T): T {
    if (this.opts.metadataOnly || !obj.apiVersion || !obj.kind) {
      obj.apiVersion = this.kind.apiVersion;
      obj.kind = this.kind.kind;
    }
    return this.transform(obj);
  }

  private deliver(ev: WatchEvent<T>): void {
    const rv = ev.object.metadata.resourceVersion;
    if (ev.type === "ERROR") return; // parseWatchStream throws on ERROR; kept for exhaustiveness
    if (ev.type !== "BOOKMARK") this.sink.event(ev.type, this.complete(ev.object));
    // The resume point moves with every event handed over, so a stream that breaks after this line
    // resumes after this event, never before it (which would replay it).
    this.step({ type: "delivered", resourceVersion: rv || undefined });
    if (rv) this.sink.progress(rv);
  }
}

/** A continue token expired between pages of a list (410 during paging). */
class ExpiredContinueError extends Error {
  constructor(cause: GoneError) {
    super(`continue token expired during a paged list: ${cause.message}`, { cause });
    this.name = "ExpiredContinueError";
  }
}

/** Errors that will not go away by retrying soon: reported once and surfaced in readiness. */
export function isPermissionError(err: unknown): err is ForbiddenError | UnauthorizedError {
  return err instanceof ForbiddenError || err instanceof UnauthorizedError;
}
