/**
 * How a Manager with `shards` wires sharding in: which kinds' caches are sharded by which field, one
 * key gate per controller, the ShardRouter and the ShardCoordinator. The manager calls it before the
 * controllers are set up and starts the coordinator once the caches synced.
 */
import type { Cache } from "../cache/cache.ts";
import type { KubeClient } from "../client/client.ts";
import { kindScope } from "../client/scopes.ts";
import { objectKey, versionKindKey, type KindRef, type ReadonlyKubeObject } from "../client/types.ts";
import type { Clock } from "../clock/index.ts";
import type { Controller, KeyGate } from "../controller/controller.ts";
import { keyToRequest } from "../controller/reconcile.ts";
import type { Logger } from "../logging/index.ts";
import type { Metrics } from "../metrics/index.ts";
import { ShardCoordinator } from "../sharding/coordinator.ts";
import { leaseNamespace } from "./namespace.ts";
import {
  ShardRouter,
  detectServerSharding,
  type ShardKeyField,
  type ShardedKind,
} from "../sharding/router.ts";

/**
 * A sharded Manager: its controllers' keys are split into `count` shards, and each replica reconciles
 * only the shards whose Lease it holds (at most ceil(count / live replicas)); see the README's "Sharding".
 */
export interface ShardingOptions {
  /** The fixed number of shards, the same on every replica (e.g. 16). */
  count: number;
  /** Namespace of the shard and heartbeat Leases (default: POD_NAMESPACE, else "default"). */
  namespace?: string;
  /** Prefix of the Lease names, unique per operator (default: the operator's name). */
  name?: string;
  /** This replica's identity (default host name plus a random id). */
  identity?: string;
  /** How long a replica's shards wait after its last renewal before others take them (default 15 s). */
  leaseDurationMs?: number;
  /** How long a shard's renewal may fail before its work stops (default 10 s). */
  renewDeadlineMs?: number;
  /** Interval of renewals, membership reads and acquisitions (default 2 s). */
  retryPeriodMs?: number;
  /**
   * How informers of sharded kinds are filtered: "server" sends a shardSelector (needs the
   * `ShardedListAndWatch` feature gate), "client" filters what arrives, "auto" (default) detects.
   */
  filtering?: "auto" | "server" | "client";
}

/** What the manager keeps of its sharding. */
export interface Sharding {
  /** Holds this replica's shard Leases. */
  coordinator: ShardCoordinator;
  /** Routes informer filters and keys to the held shards. */
  router: ShardRouter;
  /** The gate of each controller. */
  gates: Map<Controller, KeyGate>;
  /** Whether the server filters ("server") or this process does ("client"). */
  mode: "server" | "client";
}

// Deleted keys whose not-found run has not been dispatched yet, per uid-sharded controller.
const DELETED_KEYS_LIMIT = 10_000;

/** What `setupSharding` needs from the manager. */
interface ShardingDeps {
  options: ShardingOptions;
  group: string;
  identity: string;
  client: KubeClient;
  cache: Cache;
  controllers: Controller[];
  metrics: Metrics;
  logger: Logger;
  clock: Clock | undefined;
}

/** A controller with the field its keys are sharded by. */
interface ShardedController {
  controller: Controller;
  field: ShardKeyField;
}

/** Build the sharding of `controllers`; sets the cache's filters (no shard held yet). */
export async function setupSharding(deps: ShardingDeps): Promise<Sharding> {
  const { options, client, cache, controllers, logger } = deps;
  const namespace = leaseNamespace(options.namespace);
  const mode = await filteringMode(options, client, namespace, logger);
  const { sharded, kinds } = await shardPlan(controllers, client);
  const router: ShardRouter = new ShardRouter({
    count: options.count,
    cache,
    kinds,
    serverSide: mode === "server",
    logger,
    clock: deps.clock,
    onActivated: (shard) => {
      for (const { controller, field } of sharded)
        controller.enqueueCached((obj) => router.shardOf(obj, field) === shard);
    },
  });
  await router.initialize();
  const gates = new Map(sharded.map((s) => [s.controller, keyGate(s, router, cache)]));
  const coordinator = new ShardCoordinator({
    client,
    namespace,
    group: options.name ?? deps.group,
    count: options.count,
    identity: options.identity ?? deps.identity,
    leaseDurationMs: options.leaseDurationMs,
    renewDeadlineMs: options.renewDeadlineMs,
    retryPeriodMs: options.retryPeriodMs,
    clock: deps.clock,
    logger,
    metrics: deps.metrics.shards(() => router.keysPerShard(cachedObjects(sharded, cache))),
  });
  logger.info(
    {
      mode,
      shards: options.count,
      lease: `${namespace}/${options.name ?? deps.group}-shard-*`,
      identity: coordinator.identity,
      shardedKinds: kinds.map((k) => `${k.kind.kind}.${k.kind.apiVersion} by ${k.field}`),
    },
    mode === "server"
      ? "sharding: the API server filters list/watch by shardSelector"
      : "sharding: the API server does not shard list/watch; filtering on the client",
  );
  return { coordinator, router, gates, mode };
}

/** Whether the API server filters by shard ("server") or this process does ("client"); "auto" detects. */
async function filteringMode(
  options: ShardingOptions,
  client: KubeClient,
  namespace: string,
  logger: Logger,
): Promise<"server" | "client"> {
  if ((options.filtering ?? "auto") !== "auto") return options.filtering === "server" ? "server" : "client";
  try {
    return (await detectServerSharding(client, namespace)) ? "server" : "client";
  } catch (err) {
    logger.warn({ err: String(err) }, "could not detect server-side sharding; filtering on the client");
    return "client";
  }
}

/**
 * Which field each controller shards by, and which kinds' caches follow; a kind two controllers would
 * shard differently stays unsharded (its keys are still gated).
 */
async function shardPlan(
  controllers: Controller[],
  client: KubeClient,
): Promise<{ sharded: ShardedController[]; kinds: ShardedKind[] }> {
  const namespaced = async (kind: KindRef): Promise<boolean> =>
    (kindScope(kind) ?? ((await client.mapping(kind)).namespaced ? "Namespaced" : "Cluster")) ===
    "Namespaced";
  const sharded: ShardedController[] = [];
  const wanted = new Map<string, { kind: KindRef; field: ShardKeyField | "conflict" }>();
  const want = (kind: KindRef, field: ShardKeyField): void => {
    const prev = wanted.get(versionKindKey(kind));
    wanted.set(versionKindKey(kind), { kind, field: prev && prev.field !== field ? "conflict" : field });
  };
  // Watched kinds stay whole: a map function may wake a parent from an object in any namespace (a
  // shared Secret), and the parent's holder must see that object whichever shard its namespace is in.
  // Owned children share their parent's namespace (owner references do not cross namespaces).
  const whole = new Set<string>();
  for (const c of controllers) {
    const field: ShardKeyField = c.shardKey ?? ((await namespaced(c.forKind)) ? "namespace" : "uid");
    sharded.push({ controller: c, field });
    want(c.forKind, field);
    if (field === "namespace") for (const k of c.ownedKinds) if (await namespaced(k)) want(k, "namespace");
    for (const k of c.watchedKinds) whole.add(versionKindKey(k));
  }
  const kinds: ShardedKind[] = [];
  for (const [key, { kind, field }] of wanted)
    if (field !== "conflict" && !whole.has(key)) kinds.push({ kind, field });
  return { sharded, kinds };
}

/** The gate admitting only the keys of the shards this replica holds. */
function keyGate({ controller: c, field }: ShardedController, router: ShardRouter, cache: Cache): KeyGate {
  // By uid, a deleted object is no longer cached, yet its not-found run is due on the replica that
  // held it: the shard of a deleted key is remembered until that key is next dispatched (only then:
  // a later object of the same name may belong to another replica's shard).
  const gone = new Map<string, number>();
  if (field === "uid")
    cache.informer(c.forKind).addEventHandler({
      onAdd: (obj) => void gone.delete(objectKey(obj)),
      onDelete: (obj) => {
        const key = objectKey(obj);
        gone.delete(key);
        gone.set(key, router.shardOf(obj, "uid"));
        if (gone.size > DELETED_KEYS_LIMIT) gone.delete(gone.keys().next().value ?? "");
      },
    });
  return router.gate((key) => {
    const req = keyToRequest(key);
    if (field === "namespace") return router.space.shardOf(req.namespace ?? "");
    // By uid: the cached object says which shard; a key whose object is not cached (not ours, or
    // gone before this replica saw it) is not this replica's to reconcile.
    try {
      const obj = cache.get(c.forKind, req.name, { namespace: req.namespace });
      if (obj) return router.shardOf(obj, "uid");
    } catch {
      return undefined;
    }
    const shard = gone.get(key);
    gone.delete(key);
    return shard;
  });
}

/** Every cached object of the sharded controllers' kinds, with its shard field (for the keys-per-shard gauge). */
function cachedObjects(
  sharded: ShardedController[],
  cache: Cache,
): { obj: ReadonlyKubeObject; field: ShardKeyField }[] {
  return sharded.flatMap(({ controller, field }) => {
    try {
      return cache
        .informer(controller.forKind)
        .list()
        .map((obj) => ({ obj, field }));
    } catch {
      return [];
    }
  });
}
