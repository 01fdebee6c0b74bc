/**
 * KubeClient: typed CRUD, patch, server-side apply, subresources and watches for any kind the server
 * serves, over one keep-alive connection pool per cluster.
 */
import { KubeConfig } from "@kubernetes/client-node";
import { RestMapper, resourcePath, type ResourceMapping } from "./mapping.ts";
import { Transport, type QueryValue, type TransportOptions } from "./transport.ts";
import { parseWatchStream } from "./watch.ts";
import type { KindRef, KubeList, KubeObject, WatchEvent } from "./types.ts";

export interface ClientOptions extends TransportOptions {
  /** Kubeconfig context to use instead of current-context. */
  context?: string;
  /** Default field manager for writes and server-side apply (one per operator). */
  fieldManager?: string;
}

export interface NamespaceOption {
  namespace?: string;
}

export interface ListOptions extends NamespaceOption {
  labelSelector?: string;
  fieldSelector?: string;
  limit?: number;
  continue?: string;
  resourceVersion?: string;
  resourceVersionMatch?: "Exact" | "NotOlderThan";
  signal?: AbortSignal;
  /** Ask only for metadata (PartialObjectMetadata): far less memory for kinds whose content is not needed. */
  metadataOnly?: boolean;
}

export interface WriteOptions {
  dryRun?: boolean;
  fieldManager?: string;
  /** How the server treats unknown or duplicate fields: "Strict" fails the request. */
  fieldValidation?: "Ignore" | "Warn" | "Strict";
}

export interface UpdateOptions extends WriteOptions {
  subresource?: string;
}

export type PatchType = "json" | "merge" | "strategic";

export interface PatchOptions extends WriteOptions, NamespaceOption {
  type: PatchType;
  subresource?: string;
}

export interface ApplyOptions extends WriteOptions {
  force?: boolean;
  subresource?: string;
}

export interface DeleteOptions extends NamespaceOption {
  propagationPolicy?: "Foreground" | "Background" | "Orphan";
  gracePeriodSeconds?: number;
  preconditions?: { uid?: string; resourceVersion?: string };
  dryRun?: boolean;
}

export interface DeleteAllOfOptions extends DeleteOptions {
  labelSelector?: string;
  fieldSelector?: string;
}

export interface WatchOptions extends NamespaceOption {
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion?: string;
  allowWatchBookmarks?: boolean;
  timeoutSeconds?: number;
  sendInitialEvents?: boolean;
  signal?: AbortSignal;
  /** Milliseconds without any byte before the stream is considered dead. */
  idleTimeoutMs?: number;
  metadataOnly?: boolean;
}

const METADATA_LIST_ACCEPT =
  "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA_ACCEPT = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json";

const PATCH_CONTENT_TYPES: Record<PatchType, string> = {
  json: "application/json-patch+json",
  merge: "application/merge-patch+json",
  strategic: "application/strategic-merge-patch+json",
};

export class KubeClient {
  readonly transport: Transport;
  readonly mapper: RestMapper;
  readonly kubeConfig: KubeConfig;
  readonly fieldManager: string;

  private constructor(kubeConfig: KubeConfig, transport: Transport, fieldManager: string) {
    this.kubeConfig = kubeConfig;
    this.transport = transport;
    this.mapper = new RestMapper(transport);
    this.fieldManager = fieldManager;
  }

  /**
   * Standard loading rules: an explicit path, else `$KUBECONFIG`, else `~/.kube/config`, else the in-cluster
   * service account.
   */
  static async fromKubeconfig(path?: string, options: ClientOptions = {}): Promise<KubeClient> {
    const kc = new KubeConfig();
    if (path) kc.loadFromFile(path);
    else {
      kc.loadFromDefault();
      if (!kc.getCurrentCluster() && process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
    }
    if (options.context) kc.setCurrentContext(options.context);
    if (!kc.getCurrentCluster()) {
      throw new Error(
        "no Kubernetes cluster configured: pass a kubeconfig path, set KUBECONFIG, or run inside a cluster",
      );
    }
    return KubeClient.fromKubeConfig(kc, options);
  }

  static async fromKubeConfig(kc: KubeConfig, options: ClientOptions = {}): Promise<KubeClient> {
    const transport = await Transport.create(kc, options);
    return new KubeClient(kc, transport, options.fieldManager ?? "opkit");
  }

  mapping(kind: KindRef): Promise<ResourceMapping> {
    return this.mapper.mapping(kind.apiVersion, kind.kind);
  }

  private async pathFor(
    kind: KindRef,
    namespace?: string,
    name?: string,
    subresource?: string,
  ): Promise<string> {
    const m = await this.mapping(kind);
    if (m.namespaced && name !== undefined && !namespace) {
      throw new Error(`${kind.kind} ${name} is namespaced: pass a namespace`);
    }
    return resourcePath(m, namespace, name, subresource);
  }

  async get<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    opts: NamespaceOption & { subresource?: string } = {},
  ): Promise<T> {
    const path = await this.pathFor(kind, opts.namespace, name, opts.subresource);
    return this.transport.request<T>({ method: "GET", path });
  }

  /** One page of a list. */
  async list<T extends KubeObject>(kind: KindRef<T>, opts: ListOptions = {}): Promise<KubeList<T>> {
    const path = await this.pathFor(kind, opts.namespace);
    return this.transport.request<KubeList<T>>({
      method: "GET",
      path,
      signal: opts.signal,
      accept: opts.metadataOnly ? METADATA_LIST_ACCEPT : undefined,
      query: {
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
        limit: opts.limit,
        continue: opts.continue,
        resourceVersion: opts.resourceVersion,
        resourceVersionMatch: opts.resourceVersionMatch,
      },
    });
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

  async create<T extends KubeObject>(obj: T, opts: WriteOptions & { subresource?: string } = {}): Promise<T> {
    const kind = kindOf(obj);
    const path = await this.pathFor(kind, obj.metadata.namespace);
    const sub = opts.subresource;
    const full = sub ? `${path}/${encodeURIComponent(obj.metadata.name ?? "")}/${sub}` : path;
    return this.transport.request<T>({ method: "POST", path: full, body: obj, query: this.writeQuery(opts) });
  }

  /** Replace an object. Optimistic concurrency: the server refuses a stale `metadata.resourceVersion` (ConflictError). */
  async update<T extends KubeObject>(obj: T, opts: UpdateOptions = {}): Promise<T> {
    const path = await this.pathFor(kindOf(obj), obj.metadata.namespace, nameOf(obj), opts.subresource);
    return this.transport.request<T>({ method: "PUT", path, body: obj, query: this.writeQuery(opts) });
  }

  updateStatus<T extends KubeObject>(obj: T, opts: WriteOptions = {}): Promise<T> {
    return this.update(obj, { ...opts, subresource: "status" });
  }

  async patch<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    patch: unknown,
    opts: PatchOptions,
  ): Promise<T> {
    const path = await this.pathFor(kind, opts.namespace, name, opts.subresource);
    return this.transport.request<T>({
      method: "PATCH",
      path,
      body: patch,
      contentType: PATCH_CONTENT_TYPES[opts.type],
      query: this.writeQuery(opts),
    });
  }

  /**
   * Server-side apply: the object states the fields this field manager owns. A conflict with another
   * manager throws ConflictError unless `force`.
   */
  async apply<T extends KubeObject>(obj: T, opts: ApplyOptions = {}): Promise<T> {
    const path = await this.pathFor(kindOf(obj), obj.metadata.namespace, nameOf(obj), opts.subresource);
    return this.transport.request<T>({
      method: "PATCH",
      path,
      body: obj,
      contentType: "application/apply-patch+yaml",
      query: {
        ...this.writeQuery(opts),
        fieldManager: opts.fieldManager ?? this.fieldManager,
        force: opts.force,
      },
    });
  }

  applyStatus<T extends KubeObject>(obj: T, opts: ApplyOptions = {}): Promise<T> {
    return this.apply(obj, { ...opts, subresource: "status" });
  }

  /** Delete; returns the object (or Status) the server answers with. */
  async delete<T extends KubeObject>(
    kind: KindRef<T>,
    name: string,
    opts: DeleteOptions = {},
  ): Promise<unknown> {
    const path = await this.pathFor(kind, opts.namespace, name);
    return this.transport.request<unknown>({
      method: "DELETE",
      path,
      body: deleteBody(opts),
      query: { dryRun: opts.dryRun ? "All" : undefined },
    });
  }

  async deleteAllOf<T extends KubeObject>(kind: KindRef<T>, opts: DeleteAllOfOptions = {}): Promise<unknown> {
    const path = await this.pathFor(kind, opts.namespace);
    return this.transport.request<unknown>({
      method: "DELETE",
      path,
      body: deleteBody(opts),
      query: {
        labelSelector: opts.labelSelector,
        fieldSelector: opts.fieldSelector,
        dryRun: opts.dryRun ? "All" : undefined,
      },
    });
  }

  /** Open a watch; the iterator ends when the server closes the stream, and throws typed errors. */
  async watch<T extends KubeObject>(
    kind: KindRef<T>,
    opts: WatchOptions = {},
  ): Promise<AsyncGenerator<WatchEvent<T>>> {
    const path = await this.pathFor(kind, opts.namespace);
    const query: Record<string, QueryValue> = {
      watch: true,
      labelSelector: opts.labelSelector,
      fieldSelector: opts.fieldSelector,
      resourceVersion: opts.resourceVersion,
      allowWatchBookmarks: opts.allowWatchBookmarks ?? true,
      timeoutSeconds: opts.timeoutSeconds,
      sendInitialEvents: opts.sendInitialEvents,
      resourceVersionMatch: opts.sendInitialEvents ? "NotOlderThan" : undefined,
    };
    const body = await this.transport.stream({
      method: "GET",
      path,
      query,
      signal: opts.signal,
      accept: opts.metadataOnly ? METADATA_ACCEPT : undefined,
      idleTimeoutMs: opts.idleTimeoutMs ?? ((opts.timeoutSeconds ?? 600) + 30) * 1000,
    });
    return parseWatchStream<T>(body, { method: "GET", path: `${path}?watch=true` });
  }

  /** A raw JSON request for anything else (`/version`, custom subresources, aggregated APIs). */
  raw<R>(method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE", path: string, body?: unknown): Promise<R> {
    return this.transport.request<R>({ method, path, body });
  }

  close(): Promise<void> {
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
