/**
 * KubeClient: typed CRUD, patch, server-side apply, subresources and watches for any kind the server
 * serves, over one keep-alive connection pool per cluster. Every call takes an AbortSignal; a view made
 * by `withDefaults` shares the pool and the REST mapping and defaults the signal and field manager.
 */
import type { KubeConfig } from "@kubernetes/client-node";
import {
  configFromClientNode,
  isClientNodeKubeConfig,
  loadClusterConfig,
  type ClusterConfig,
} from "./config.ts";
import { NotFoundError } from "./errors.ts";
import { RestMapper, resourcePath, type ResourceMapping } from "./mapping.ts";
import type { WriteFence } from "./fence.ts";
import {
  Transport,
  defaultUserAgent,
  type QueryValue,
  type RequestOptions,
  type TransportOptions,
} from "./transport.ts";
import { parseListBody } from "./liststream.ts";
import { ProtobufDecodeError, protobufMessage } from "./protobuf/decode.ts";
import { PROTOBUF, parseProtobufList } from "./protobuf/list.ts";
import { parseProtobufWatchStream } from "./protobuf/watch.ts";
import { parseWatchStream } from "./watch.ts";
import type { KindRef, KubeList, KubeObject, WatchEvent } from "./types.ts";

/** How a client talks to its cluster (transport options plus the default field manager). */
export interface ClientOptions extends TransportOptions {
  /** Kubeconfig context to use instead of current-context (`load`, or a client-node KubeConfig). */
  context?: string;
  /** Default field manager for writes and server-side apply (one per operator); also names the User-Agent. */
  fieldManager?: string;
  /**
   * Read watches, and lists handed over item by item (`onItem`, as the cache lists), as protobuf for the
   * built-in kinds of the API's GA versions, as controller-runtime does (default true). The API server
   * encodes protobuf about twice as fast as JSON and a third smaller; the objects are decoded to exactly what
   * the JSON answer gives. A kind whose answer holds anything the pinned messages do not describe (a newer
   * server's field) is read as JSON from then on.
   */
  protobuf?: boolean;
}

/** `KubeClient.load`'s options: where the kubeconfig is, and the client's options. */
export interface LoadOptions extends ClientOptions {
  /** An explicit kubeconfig path; default `$KUBECONFIG`, then `~/.kube/config`, then in-cluster. */
  kubeconfig?: string;
}

/** What every call accepts. */
export interface CallOptions {
  /** Aborts the request and any retry wait; the call throws RequestAbortedError (reason in `reason`). */
  signal?: AbortSignal;
}

/** Defaults a `withDefaults` view applies to every call. */
export interface ClientDefaults {
  /** Combined with each call's own signal: either aborts the call. */
  signal?: AbortSignal;
  /**
   * The field manager this view's writes and applies use when a call names none (its own operator's, so
   * ownership of fields is not attributed to someone else).
   */
  fieldManager?: string;
  /**
   * Consulted before each write of this view and the views made from it (reads are not fenced): once it
   * closes, writes fail with FencedWriteError and those in flight are cut. The manager fences its
   * client with the leader election's renewals.
   */
  fence?: WriteFence;
}

/** The namespace of a namespaced kind (ignored for cluster-scoped kinds). */
export interface NamespaceOption {
  /** The namespace to address; default the client's kubeconfig namespace for namespaced kinds. */
  namespace?: string;
}

/** `get`'s options. */
export interface GetOptions extends NamespaceOption, CallOptions {
  /** Read a subresource instead of the object, e.g. "status" or "scale". */
  subresource?: string;
}

/** `list`'s and `listAll`'s options. */
export interface ListOptions extends NamespaceOption, CallOptions {
  /** Only objects whose labels match, in the API's selector syntax (`app=web,tier!=db`). */
  labelSelector?: string;
  /**
   * Only objects whose fields match, e.g. `metadata.name=x` or `spec.nodeName=n1`; the server supports few
   * fields per kind.
   */
  fieldSelector?: string;
  /**
   * Only objects in these shards, as a KEP-5866 shard selector, e.g.
   * `shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')`. Honoured only by an
   * API server with the `ShardedListAndWatch` feature gate (1.36+); others ignore it and return everything.
   */
  shardSelector?: string;
  /**
   * Page size: at most this many items per response; pass the returned `continue` token for the next page.
   */
  limit?: number;
  /** The `metadata.continue` token of the previous page, to fetch the next one. */
  continue?: string;
  /**
   * Read at (or not older than) this resource version; "0" lets the server answer from its watch cache, which
   * is cheaper but may be stale.
   */
  resourceVersion?: string;
  /** How `resourceVersion` is interpreted: exactly that version, or any version not older than it. */
  resourceVersionMatch?: "Exact" | "NotOlderThan";
  /** Ask only for metadata (PartialObjectMetadata): far less memory for kinds whose content is not needed. */
  metadataOnly?: boolean;
  /**
   * Hand each item to this callback as soon as it is decoded, instead of returning it in `items` (which is
   * then empty): the answer is parsed while it arrives and never held whole as text, so a large list costs
   * less memory and its decoding overlaps the transfer. A list that fails midway throws after some items
   * were handed over (and is not retried, since a second answer could differ from the first).
   */
  onItem?: (item: never) => void;
  /**
   * With `onItem`: leave out each item's `metadata.managedFields` (skipped before it is decoded, which saves
   * the work for what is often 40% of an object); the cache's default transform drops them anyway.
   */
  omitManagedFields?: boolean;
  /**
   * With `onItem`: every object and array inside each item may come frozen (`Object.freeze`), which a
   * protobuf answer does as it is decoded, at a fraction of the cost of a walk afterwards, and may be
   * shared with other items (a sub-object with the same bytes as the one at the same place in the item
   * before is that object). For a caller that freezes what it keeps, as the cache does. The item itself
   * stays open, and JSON answers come unfrozen: freeze the item deeply in any case.
   */
  freezeNested?: boolean;
}

/** Options shared by writes. */
export interface WriteOptions extends CallOptions {
  /** Have the server validate and admit the write without persisting it, e.g. to preview a change. */
  dryRun?: boolean;
  /** The field manager recorded for this write; default the client's (the operator's) field manager. */
  fieldManager?: string;
  /** How the server treats unknown or duplicate fields: "Strict" fails the request. */
  fieldValidation?: "Ignore" | "Warn" | "Strict";
}

/** `update`'s options. */
export interface UpdateOptions extends WriteOptions {
  /** Write a subresource, e.g. "status", so spec and status writes stay separate. */
  subresource?: string;
}

/** JSON patch (RFC 6902), JSON merge patch (RFC 7386) or Kubernetes strategic merge patch. */
export type PatchType = "json" | "merge" | "strategic";

/** `patch`'s options. */
export interface PatchOptions extends WriteOptions, NamespaceOption {
  /** Which patch format the body is in. */
  type: PatchType;
  /** Patch a subresource, e.g. "status" or "scale". */
  subresource?: string;
}

/** Server-side apply's options. */
export interface ApplyOptions extends WriteOptions {
  /**
   * Take ownership of fields another manager owns instead of failing with a conflict; controllers usually
   * force, since they are the authority for what they apply.
   */
  force?: boolean;
  /** Apply to a subresource, e.g. "status". */
  subresource?: string;
}

/** `delete`'s options. */
export interface DeleteOptions extends NamespaceOption, CallOptions {
  /**
   * What happens to dependents: "Background" (default for most kinds) deletes them after the owner,
   * "Foreground" before it, "Orphan" keeps them.
   */
  propagationPolicy?: "Foreground" | "Background" | "Orphan";
  /** Seconds the object gets to shut down (pods); 0 deletes at once. */
  gracePeriodSeconds?: number;
  /**
   * Delete only if the object still has this uid or resource version, so a recreated or changed object is not
   * deleted by mistake.
   */
  preconditions?: {
    /** Delete only the object with this uid (not a newer one with the same name). */
    uid?: string;
    /** Delete only if the object is still at this version. */
    resourceVersion?: string;
  };
  /** Have the server check the delete without performing it. */
  dryRun?: boolean;
}

/** `deleteAllOf`'s options. */
export interface DeleteAllOfOptions extends DeleteOptions {
  /** Delete only objects whose labels match this selector. */
  labelSelector?: string;
  /** Delete only objects whose fields match this selector. */
  fieldSelector?: string;
}

/** `watch`'s options. */
export interface WatchOptions extends NamespaceOption, CallOptions {
  /** Only events for objects whose labels match this selector. */
  labelSelector?: string;
  /** Only events for objects whose fields match this selector. */
  fieldSelector?: string;
  /**
   * Only objects in these shards, as a KEP-5866 shard selector, e.g.
   * `shardRange(object.metadata.namespace, '0x0000000000000000', '0x8000000000000000')`. Honoured only by an
   * API server with the `ShardedListAndWatch` feature gate (1.36+); others ignore it and return everything.
   */
  shardSelector?: string;
  /**
   * Start after this resource version (from a list or an earlier watch); a too old one fails with 410 Gone,
   * then list again.
   */
  resourceVersion?: string;
  /**
   * Ask for BOOKMARK events, which advance the resource version without a change, so a restart resumes
   * without a relist.
   */
  allowWatchBookmarks?: boolean;
  /**
   * Ask the server to end the watch after this many seconds; the caller then resumes from the last resource
   * version.
   */
  timeoutSeconds?: number;
  /** Stream the current objects as ADDED events first (watch-list), instead of a separate list call. */
  sendInitialEvents?: boolean;
  /** Milliseconds without any byte before the stream is considered dead. */
  idleTimeoutMs?: number;
  /** Watch only metadata (PartialObjectMetadata), for kinds whose content is not needed. */
  metadataOnly?: boolean;
  /**
   * Leave out each object's `metadata.managedFields` (cut from the event's text before it is decoded, which
   * saves the parse; for callers that drop them anyway, as the cache does by default).
   */
  omitManagedFields?: boolean;
  /**
   * Every object and array inside each event's object may come frozen (`Object.freeze`), and shared with
   * other events' objects: see `ListOptions.freezeNested`.
   */
  freezeNested?: boolean;
}

/** `raw`'s options. */
export interface RawOptions extends CallOptions {
  /** A repeat cannot do harm: retry 5xx answers and lost connections (default: GET only). */
  idempotent?: boolean;
}

const METADATA_LIST_ACCEPT =
  "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const PROTOBUF_ACCEPT = `${PROTOBUF}, application/json`;
const METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
};

/** The pool, REST mapping and configuration that a client and its views share. */
interface Shared {
  transport: Transport;
  mapper: RestMapper;
  config: ClusterConfig;
  protobuf: boolean;
  /** `apiVersion/kind` of the kinds whose protobuf answer could not be decoded: read as JSON. */
  jsonOnly: Set<string>;
}

/**
 * A client for one cluster. Errors are typed (errors.ts); writes are retried only where a retry cannot
 * do harm (transport.ts says which).
 */
export class KubeClient {
  /**
   * The HTTP transport (connection pool, retries, rate limit) that every call of this client and its views
   * goes through.
   */
  readonly transport: Transport;
  /** The REST mapper that turns a kind into its resource path via discovery; shared with views. */
  readonly mapper: RestMapper;
  /** The cluster and credentials this client uses (from the kubeconfig, in-cluster, or given). */
  readonly config: ClusterConfig;
  /**
   * The field manager writes and applies use by default (ClientOptions.fieldManager, or the `withDefaults`
   * one).
   */
  readonly fieldManager: string;
  /** The signal a `withDefaults` view adds to every call. */
  readonly signal: AbortSignal | undefined;
  private readonly isView: boolean;
  private readonly shared: Shared;
  private readonly fence: WriteFence | undefined;

  private constructor(
    shared: Shared,
    fieldManager: string,
    signal: AbortSignal | undefined,
    isView: boolean,
    fence?: WriteFence,
  ) {
    this.shared = shared;
    this.fence = fence;
    this.transport = shared.transport;
    this.mapper = shared.mapper;
    this.config = shared.config;
    this.fieldManager = fieldManager;
    this.signal = signal;
    this.isView = isView;
  }

  /**
   * A client from the standard loading rules: `kubeconfig` (or a path given alone), else `$KUBECONFIG`,
   * else `~/.kube/config`, else the in-cluster service account. Only exec and auth-provider plugins need
   * more than opkit's own parser (the latter load @kubernetes/client-node on first use).
   */
  static async load(pathOrOptions: string | LoadOptions = {}): Promise<KubeClient> {
    const options: LoadOptions =
      typeof pathOrOptions === "string" ? { kubeconfig: pathOrOptions } : pathOrOptions;
    const config = await loadClusterConfig({ kubeconfig: options.kubeconfig, context: options.context });
    return KubeClient.fromConfig(config, options);
  }

  /**
   * A client for a configuration in hand: opkit's `ClusterConfig`, or a @kubernetes/client-node
   * `KubeConfig` object (its current context, or `options.context`).
   */
  static async fromConfig(
    config: ClusterConfig | KubeConfig,
    options: ClientOptions = {},
  ): Promise<KubeClient> {
    const resolved = isClientNodeKubeConfig(config) ? configFromClientNode(config, options.context) : config;
    const transport = await Transport.create(resolved, {
      ...options,
      userAgent: options.userAgent ?? defaultUserAgent(options.fieldManager),
    });
    return new KubeClient(
      {
        transport,
        mapper: new RestMapper(transport),
        config: resolved,
        protobuf: options.protobuf ?? true,
        jsonOnly: new Set(),
      },
      options.fieldManager ?? "opkit",
      undefined,
      false,
    );
  }

  /**
   * A view of this client whose calls default to `signal` (combined with a call's own) and
   * `fieldManager`. It shares the connection pool and the REST mapping: making one is cheap (one per
   * reconcile), and closing it does nothing.
   */
  withDefaults(defaults: ClientDefaults): KubeClient {
    return new KubeClient(
      this.shared,
      defaults.fieldManager ?? this.fieldManager,
      combine(this.signal, defaults.signal),
      true,
      defaults.fence ?? this.fence,
    );
  }

  /** The REST mapping of a kind (cached discovery). */
  mapping(kind: KindRef, opts: CallOptions = {}): Promise<ResourceMapping> {
    return this.mapper.mapping(kind.apiVersion, kind.kind, this.signalFor(opts));
  }

  /** A request of this client's: writes go through its fence, if it has one. */
  private send<R>(opts: RequestOptions): Promise<R> {
    return this.transport.request<R>(
      this.fence && opts.method !== "GET" ? { ...opts, fence: this.fence } : opts,
    );
  }

  private signalFor(opts: CallOptions): AbortSignal | undefined {
    return combine(this.signal, opts.signal);
  }

  private async pathFor(
    kind: KindRef,
    signal: AbortSignal | undefined,
    namespace?: string,
    name?: string,
    subresource?: string,
  ): Promise<string> {
    const m = await this.mapper.mapping(kind.apiVersion, kind.kind, signal);
    if (m.namespaced && name !== undefined && !namespace) {
      throw new Error(`${kind.kind} ${name} is namespaced: pass a namespace`);
    }
    return resourcePath(m, namespace, name, subresource);
  }

  /** Read one object (or one of its subresources). */
  async get<T extends KubeObject>(kind: KindRef<T>, name: string, opts: GetOptions = {}): Promise<T> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(kind, signal, opts.namespace, name, opts.subresource);
    return this.transport.request<T>({ method: "GET", path, signal });
  }

  /**
   * The object, or undefined when it does not exist (kube-rs's `get_opt`, controller-runtime's
   * `IgnoreNotFound`): every other error still throws.
   */
  async getOptional<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    opts: GetOptions = {},
  ): Promise<T | undefined> {
    try {
      return await this.get(kind, name, opts);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /** One page of a list. */
  async list<T extends KubeObject>(kind: KindRef<T>, opts: ListOptions = {}): Promise<KubeList<T>> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(kind, signal, opts.namespace);
    const onItem = opts.onItem as ((item: T) => void) | undefined;
    const kindKey = `${kind.apiVersion}/${kind.kind}`;
    const protobuf = onItem !== undefined && !opts.metadataOnly && this.readsProtobuf(kind, kindKey);
    try {
      return await this.transport.request<KubeList<T>>(
        {
          method: "GET",
          path,
          signal,
          // The server answers JSON where it has no protobuf for the resource: the parser follows its answer.
          accept: opts.metadataOnly ? METADATA_LIST_ACCEPT : protobuf ? PROTOBUF_ACCEPT : undefined,
          query: {
            labelSelector: opts.labelSelector,
            fieldSelector: opts.fieldSelector,
            shardSelector: opts.shardSelector,
            limit: opts.limit,
            continue: opts.continue,
            resourceVersion: opts.resourceVersion,
            resourceVersionMatch: opts.resourceVersionMatch,
          },
        },
        onItem
          ? (chunks, contentType) =>
              contentType.startsWith(PROTOBUF)
                ? parseProtobufList<KubeList<T>>(chunks, onItem, {
                    omitManagedFields: opts.omitManagedFields,
                    freeze: opts.freezeNested,
                  })
                : parseListBody<KubeList<T>>(chunks, onItem, { omitManagedFields: opts.omitManagedFields })
          : undefined,
      );
    } catch (err) {
      // Items may have been handed over already, so no silent second answer: the caller's retry reads JSON.
      if (err instanceof ProtobufDecodeError) this.shared.jsonOnly.add(kindKey);
      throw err;
    }
  }

  /** Every page of a list (pages of `limit`, default 500), with the resourceVersion of the first page. */
  async listAll<T extends KubeObject>(kind: KindRef<T>, opts: ListOptions = {}): Promise<KubeList<T>> {
    const items: T[] = [];
    let cont: string | undefined;
    let first: KubeList<T> | undefined;
    do {
      const page = await this.list(kind, { ...opts, limit: opts.limit ?? 500, continue: cont });
      first ??= page;
      items.push(...page.items);
      cont = page.metadata.continue || undefined;
    } while (cont);
    return { ...first, metadata: { resourceVersion: first.metadata.resourceVersion }, items };
  }

  /**
   * Create an object (or POST to a subresource of an object of the body's own kind; for a subresource
   * whose body is another kind, such as `pods/binding` or `pods/eviction`, use `createSubresource`).
   * With a fixed `metadata.name`, a lost
   * response or a 5xx is retried: the answer may then be an AlreadyExistsError with `ambiguous: true`
   * (the object may be the one the first attempt created). With only `generateName` it is never
   * retried after the request may have reached the server: that could create two objects.
   */
  async create<T extends KubeObject>(obj: T, opts: WriteOptions & { subresource?: string } = {}): Promise<T> {
    const signal = this.signalFor(opts);
    const kind = kindOf(obj);
    const path = await this.pathFor(kind, signal, obj.metadata.namespace);
    const sub = opts.subresource;
    const full = sub ? `${path}/${encodeURIComponent(obj.metadata.name ?? "")}/${sub}` : path;
    return this.send<T>({
      method: "POST",
      path: full,
      body: obj,
      query: this.writeQuery(opts),
      signal,
      idempotent: !!obj.metadata.name,
    });
  }

  /**
   * POST `body` to a subresource of the object `kind`/`name`: `pods/binding` (a scheduler binds a pod
   * to a node), `pods/eviction`, `serviceaccounts/token`. The body is of the subresource's own kind
   * (Binding, Eviction, TokenRequest), so the path comes from `kind`, not from the body. Never retried
   * after the request may have reached the server unless `idempotent` says a repeat is harmless (a
   * binding is not: the second one fails with a Conflict once the first has bound the pod).
   */
  async createSubresource<R = KubeObject, T extends KubeObject = KubeObject>(
    kind: KindRef<T>,
    name: string,
    subresource: string,
    body: KubeObject,
    opts: WriteOptions & NamespaceOption & { idempotent?: boolean } = {},
  ): Promise<R> {
    const signal = this.signalFor(opts);
    if (!subresource) throw new Error(`createSubresource of ${kind.kind} ${name}: name a subresource`);
    const path = await this.pathFor(kind, signal, opts.namespace, name, subresource);
    return this.send<R>({
      method: "POST",
      path,
      body,
      query: this.writeQuery(opts),
      signal,
      idempotent: opts.idempotent ?? false,
    });
  }

  /**
   * Replace an object. Optimistic concurrency: the server refuses a stale `metadata.resourceVersion`
   * (ConflictError). Retried after a lost response or a 5xx only when it carries a resourceVersion
   * (a repeat then cannot overwrite anyone else's change).
   */
  async update<T extends KubeObject>(obj: T, opts: UpdateOptions = {}): Promise<T> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(
      kindOf(obj),
      signal,
      obj.metadata.namespace,
      nameOf(obj),
      opts.subresource,
    );
    return this.send<T>({
      method: "PUT",
      path,
      body: obj,
      query: this.writeQuery(opts),
      signal,
      idempotent: !!obj.metadata.resourceVersion,
    });
  }

  /** Replace the status subresource (see `update`). */
  updateStatus<T extends KubeObject>(obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.update(obj, { ...opts, subresource: "status" });
  }

  /**
   * Patch an object. Merge and strategic merge patches are retried after a lost response or a 5xx
   * (applying one twice gives the same object); JSON patches are not, since operations such as
   * `add` to `/list/-` would apply twice.
   */
  async patch<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    patch: unknown,
    opts: PatchOptions,
  ): Promise<T> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(kind, signal, opts.namespace, name, opts.subresource);
    return this.send<T>({
      method: "PATCH",
      path,
      body: patch,
      contentType: PATCH_CONTENT_TYPES[opts.type],
      query: this.writeQuery(opts),
      signal,
      idempotent: opts.type !== "json",
    });
  }

  /**
   * Server-side apply: the object states the fields this field manager owns. A conflict with another
   * manager throws ConflictError unless `force`. Idempotent, so retried after a lost response or a 5xx.
   */
  async apply<T extends KubeObject>(obj: T, opts: ApplyOptions = {}): Promise<T> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(
      kindOf(obj),
      signal,
      obj.metadata.namespace,
      nameOf(obj),
      opts.subresource,
    );
    return this.send<T>({
      method: "PATCH",
      path,
      body: obj,
      contentType: "application/apply-patch+yaml",
      query: {
        ...this.writeQuery(opts),
        fieldManager: opts.fieldManager ?? this.fieldManager,
        force: opts.force,
      },
      signal,
      idempotent: true,
    });
  }

  /** Server-side apply to the status subresource. */
  applyStatus<T extends KubeObject>(obj: T, opts: ApplyOptions = {}): Promise<T> {
    return this.apply(obj, { ...opts, subresource: "status" });
  }

  /**
   * Delete; returns the object (or Status) the server answers with. Retried after a lost response or a
   * 5xx; when such a retry finds the object gone (404), the first attempt most likely deleted it, so
   * the call succeeds and returns that 404 Status instead of throwing NotFoundError.
   */
  async delete<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    opts: DeleteOptions = {},
  ): Promise<unknown> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(kind, signal, opts.namespace, name);
    try {
      return await this.send<unknown>({
        method: "DELETE",
        path,
        body: deleteBody(opts),
        query: { dryRun: opts.dryRun ? "All" : undefined },
        signal,
        idempotent: true,
      });
    } catch (err) {
      if (err instanceof NotFoundError && err.ambiguous) return err.status;
      throw err;
    }
  }

  /** Delete every object that matches the selectors (one request). */
  async deleteAllOf<T extends KubeObject>(kind: KindRef<T>, opts: DeleteAllOfOptions = {}): Promise<unknown> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(kind, signal, opts.namespace);
    return this.send<unknown>({
      method: "DELETE",
      path,
      body: deleteBody(opts),
      query: {
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
        dryRun: opts.dryRun ? "All" : undefined,
      },
      signal,
      idempotent: true,
    });
  }

  /**
   * Open a watch; the iterator ends when the server closes the stream, and throws typed errors
   * (RequestAbortedError when the signal fires, ConnectionError when the connection drops).
   */
  async watch<T extends KubeObject>(
    kind: KindRef<T>,
    opts: WatchOptions = {},
  ): Promise<AsyncGenerator<WatchEvent<T>>> {
    const signal = this.signalFor(opts);
    const path = await this.pathFor(kind, signal, opts.namespace);
    const query: Record<string, QueryValue> = {
      watch: true,
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
      shardSelector: opts.shardSelector,
      resourceVersion: opts.resourceVersion,
      allowWatchBookmarks: opts.allowWatchBookmarks ?? true,
      timeoutSeconds: opts.timeoutSeconds,
      sendInitialEvents: opts.sendInitialEvents,
      resourceVersionMatch: opts.sendInitialEvents ? "NotOlderThan" : undefined,
    };
    const kindKey = `${kind.apiVersion}/${kind.kind}`;
    const protobuf = !opts.metadataOnly && this.readsProtobuf(kind, kindKey);
    const { body, contentType } = await this.transport.streamResponse({
      method: "GET",
      path,
      query,
      signal,
      accept: opts.metadataOnly ? METADATA_ACCEPT : protobuf ? PROTOBUF_ACCEPT : undefined,
      idleTimeoutMs: opts.idleTimeoutMs ?? ((opts.timeoutSeconds ?? 600) + 30) * 1000,
    });
    const request = { method: "GET" as const, path: `${path}?watch=true` };
    const parseOpts = { omitManagedFields: opts.omitManagedFields };
    // The server answers JSON where it has no protobuf for the resource: the parser follows its answer.
    if (!contentType.startsWith(PROTOBUF)) return parseWatchStream<T>(body, request, signal, parseOpts);
    return this.noteUndecodable(
      kindKey,
      parseProtobufWatchStream<T>(body, request, signal, { ...parseOpts, freeze: opts.freezeNested }),
    );
  }

  /** Whether `kind` is asked for as protobuf: on, in the pinned tables, and not marked JSON-only. */
  private readsProtobuf(kind: KindRef<KubeObject>, kindKey: string): boolean {
    return (
      this.shared.protobuf &&
      !this.shared.jsonOnly.has(kindKey) &&
      protobufMessage(kind.apiVersion, kind.kind) !== undefined
    );
  }

  /** The events of `events`; a ProtobufDecodeError marks `kindKey` to be read as JSON from then on. */
  private async *noteUndecodable<E>(kindKey: string, events: AsyncGenerator<E>): AsyncGenerator<E> {
    try {
      yield* events;
    } catch (err) {
      if (err instanceof ProtobufDecodeError) this.shared.jsonOnly.add(kindKey);
      throw err;
    }
  }

  /**
   * A raw JSON request for anything else (`/version`, custom subresources, aggregated APIs). Only GETs
   * are retried after a 5xx or a lost response unless `idempotent` says a repeat is harmless.
   */
  raw<R>(
    method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
    path: string,
    body?: unknown,
    opts: RawOptions = {},
  ): Promise<R> {
    return this.send<R>({
      method,
      path,
      body,
      signal: this.signalFor(opts),
      idempotent: opts.idempotent,
    });
  }

  /** Close the connections (waits for in-flight requests). A `withDefaults` view closes nothing. */
  close(): Promise<void> {
    if (this.isView) return Promise.resolve();
    return this.transport.close();
  }

  private writeQuery(opts: WriteOptions): Record<string, QueryValue> {
    return {
      dryRun: opts.dryRun ? "All" : undefined,
      fieldManager: opts.fieldManager ?? this.fieldManager,
      fieldValidation: opts.fieldValidation,
    };
  }
}

function combine(a: AbortSignal | undefined, b: AbortSignal | undefined): AbortSignal | undefined {
  if (!a || a === b) return b;
  if (!b) return a;
  return AbortSignal.any([a, b]);
}

function kindOf<T extends KubeObject>(obj: T): KindRef<T> {
  if (!obj.apiVersion || !obj.kind) {
    throw new Error(`object ${obj.metadata.name ?? "(unnamed)"} has no apiVersion/kind: set both fields`);
  }
  return { apiVersion: obj.apiVersion, kind: obj.kind };
}

function nameOf(obj: KubeObject): string {
  if (!obj.metadata.name)
    throw new Error(`a ${obj.kind ?? "object"} without metadata.name cannot be updated`);
  return obj.metadata.name;
}

function deleteBody(opts: DeleteOptions): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "DeleteOptions",
    propagationPolicy: opts.propagationPolicy,
    gracePeriodSeconds: opts.gracePeriodSeconds,
    preconditions: opts.preconditions,
    dryRun: opts.dryRun ? ["All"] : undefined,
  };
}
