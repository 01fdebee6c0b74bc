/**
 * The builder: `controller("name").for(Kind).owns(Child).watches(Other, map).withOptions({...})
 * .reconcile(fn)` states what a controller reconciles and which events wake which keys, and yields a
 * Controller. It only assembles; the mapping of events to keys lives in handlers.ts.
 */
import type { KindRef, KubeObject } from "../client/types.ts";
import type { ControllerPermission } from "../client/builtins.ts";
import { Controller, type ControllerOptions } from "./controller.ts";
import { enqueueForObject, enqueueForOwner, enqueueMapped, type MapFn, type Watch } from "./handlers.ts";
import type { Predicate } from "./predicates.ts";
import { ControllerConfigError } from "./reconcile.ts";
import type { Reconciler } from "./reconcile.ts";

/** Options of `ControllerBuilder.for`. */
export interface ForOptions<T extends KubeObject> {
  /** Filter the events of the reconciled kind, e.g. `generationChanged()` to skip status-only updates. */
  predicates?: Predicate<T>[];
}

/**
 * `controller("name").for(Kind).owns(Child).watches(Other, map).withOptions({...}).reconcile(fn)`.
 */
export class ControllerBuilder<T extends KubeObject = KubeObject> {
  private readonly name: string;
  private forKind: KindRef<T> | undefined;
  private forPredicates: Predicate<T>[] = [];
  private readonly owned: { kind: KindRef; predicates: Predicate[] }[] = [];
  private readonly watched: { kind: KindRef; map: MapFn<KubeObject>; predicates: Predicate[] }[] = [];
  private options: ControllerOptions = {};
  private globalPredicates: Predicate[] = [];
  private readonly permissions: ControllerPermission[] = [];

  constructor(name: string) {
    if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
      throw new ControllerConfigError(`controller name "${name}" must be lowercase letters, digits and '-'`);
    }
    this.name = name;
  }

  /** The kind this controller reconciles: its objects' events enqueue their own key. Call it exactly once. */
  for<U extends KubeObject>(kind: KindRef<U>, opts: ForOptions<U> = {}): ControllerBuilder<U> {
    const self = this as unknown as ControllerBuilder<U>;
    if (self.forKind) throw new ControllerConfigError(`controller ${this.name}: for() may be called once`);
    self.forKind = kind;
    self.forPredicates = opts.predicates ?? [];
    return self;
  }

  /** Children whose controller owner reference points at a `for` object wake that object. */
  owns<C extends KubeObject>(kind: KindRef<C>, opts: { predicates?: Predicate<C>[] } = {}): this {
    this.owned.push({ kind, predicates: opts.predicates ?? [] });
    return this;
  }

  /** Any kind, mapped to any number of keys (e.g. a Secret to every object that references it). */
  watches<S extends KubeObject>(
    kind: KindRef<S>,
    map: MapFn<S>,
    opts: { predicates?: Predicate<S>[] } = {},
  ): this {
    this.watched.push({
      kind,
      map: map as MapFn<KubeObject>,
      predicates: opts.predicates ?? [],
    });
    return this;
  }

  /**
   * Declare what the reconcile function writes beyond opkit's defaults, for the generated RBAC, e.g.
   * `.rbac([{ kind: Jobs, verbs: ["delete"] }])`. By default a controller may read what it watches, and
   * write what opkit's helpers write for it: its children (`owns`), its own kind's status and
   * finalizers, and Events.
   */
  rbac(permissions: readonly ControllerPermission[]): this {
    this.permissions.push(...permissions);
    return this;
  }

  /** Predicates applied to every watch of this controller. */
  withPredicates(...ps: Predicate[]): this {
    this.globalPredicates.push(...ps);
    return this;
  }

  /**
   * Set worker count, reconcile timeout and retry backoff; later calls override earlier ones field by field.
   */
  withOptions(opts: ControllerOptions): this {
    if (
      opts.maxConcurrent !== undefined &&
      (!Number.isInteger(opts.maxConcurrent) || opts.maxConcurrent < 1)
    ) {
      throw new ControllerConfigError(`controller ${this.name}: maxConcurrent must be a whole number ≥ 1`);
    }
    this.options = { ...this.options, ...opts };
    return this;
  }

  /**
   * Finish the declaration with the reconcile function and return the Controller; register it with
   * `manager.add`.
   */
  reconcile(fn: Reconciler): Controller<T> {
    const forKind = this.forKind;
    if (!forKind)
      throw new ControllerConfigError(`controller ${this.name}: call for(Kind) before reconcile()`);
    const watches: Watch[] = [
      {
        kind: forKind,
        predicates: [...this.globalPredicates, ...(this.forPredicates as Predicate[])],
        map: enqueueForObject,
      },
      ...this.owned.map((o) => ({
        kind: o.kind,
        predicates: [...this.globalPredicates, ...o.predicates],
        map: enqueueForOwner(forKind),
      })),
      ...this.watched.map((w) => ({
        kind: w.kind,
        predicates: [...this.globalPredicates, ...w.predicates],
        map: enqueueMapped(w.map),
      })),
    ];
    return new Controller<T>({
      name: this.name,
      forKind,
      ownedKinds: this.owned.map((o) => o.kind),
      watchedKinds: this.watched.map((w) => w.kind),
      rbac: [...this.permissions],
      watches,
      reconciler: fn,
      options: this.options,
    });
  }
}

/**
 * Start declaring a controller: `controller("memcached").for(Memcacheds).owns(Deployments).reconcile(fn)`.
 * The name (lowercase, digits, '-') labels its logs and metrics, so keep it stable.
 */
export function controller(name: string): ControllerBuilder {
  return new ControllerBuilder(name);
}
