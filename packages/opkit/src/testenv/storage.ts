/**
 * Storage for the env: a default StorageClass (`standard`, as kind and minikube name theirs) and the
 * local provisioner behind it. For each pending claim of a class whose provisioner is
 * `opkit.dev/local-volume`, it creates a hostPath PersistentVolume under the env's `volumes/` directory,
 * pre-bound to the claim; kube-controller-manager's PV controller then binds the two, as with any
 * external provisioner. When a claim is deleted, the PV controller marks its volume Released; with
 * reclaim policy Delete the provisioner deletes the volume and its directory.
 *
 * The plan (what to create and delete) is a pure function of the listed objects; `LocalProvisioner`
 * runs it level-based: on every watch event of claims or volumes (coalesced) and on a periodic resync.
 */
import { mkdir, rm } from "node:fs/promises";
import { join, resolve, sep } from "node:path";
import { realClock, type Clock, type TimerHandle } from "../clock/index.ts";
import type { KubeClient } from "../client/client.ts";
import { AlreadyExistsError, NotFoundError } from "../client/errors.ts";
import {
  PersistentVolumeClaims,
  PersistentVolumes,
  StorageClasses,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type StorageClass,
} from "../client/builtins.ts";
import type { KindRef, KubeObject } from "../client/types.ts";
import type { Logger } from "../logging/index.ts";
import { sleep } from "./eventually.ts";

/** The provisioner name StorageClasses use to ask for opkit's local volumes. */
export const LOCAL_PROVISIONER = "opkit.dev/local-volume";
/** The env's default StorageClass. */
export const DEFAULT_STORAGE_CLASS = "standard";
/** The user the provisioner authenticates as (its client certificate's CN). */
export const PROVISIONER_USER = "opkit:local-provisioner";

const PROVISIONED_BY = "pv.kubernetes.io/provisioned-by";
const SELECTED_NODE = "volume.kubernetes.io/selected-node";

/** What the provisioner is to do next. */
export type VolumeAction =
  { type: "create"; volume: PersistentVolume; dir: string } | { type: "delete"; name: string; dir?: string };

/** The objects `up` installs: the default StorageClass and the provisioner's least-privilege RBAC. */
export function storageObjects(): KubeObject[] {
  const name = PROVISIONER_USER;
  return [
    {
      apiVersion: "storage.k8s.io/v1",
      kind: "StorageClass",
      metadata: {
        name: DEFAULT_STORAGE_CLASS,
        annotations: { "storageclass.kubernetes.io/is-default-class": "true" },
      },
      provisioner: LOCAL_PROVISIONER,
      reclaimPolicy: "Delete",
      // Immediate: the volume exists before the pod is scheduled, and a hostPath volume fits any node.
      volumeBindingMode: "Immediate",
      allowVolumeExpansion: false,
    } as StorageClass,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRole",
      metadata: { name },
      rules: [
        { apiGroups: [""], resources: ["persistentvolumeclaims"], verbs: ["get", "list", "watch"] },
        {
          apiGroups: [""],
          resources: ["persistentvolumes"],
          verbs: ["get", "list", "watch", "create", "delete"],
        },
        { apiGroups: ["storage.k8s.io"], resources: ["storageclasses"], verbs: ["get", "list", "watch"] },
      ],
    } as KubeObject,
    {
      apiVersion: "rbac.authorization.k8s.io/v1",
      kind: "ClusterRoleBinding",
      metadata: { name },
      roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "ClusterRole", name },
      subjects: [{ apiGroup: "rbac.authorization.k8s.io", kind: "User", name }],
    } as KubeObject,
  ];
}

/** The volume's directory when it lies inside `volumesDir`; never a path outside it. */
function ownDir(volumesDir: string, path: string | undefined): string | undefined {
  if (!path) return undefined;
  const root = resolve(volumesDir) + sep;
  const full = resolve(path);
  return full.startsWith(root) ? full : undefined;
}

/**
 * Decide what to create and delete, from the current claims, volumes and classes. Pure: the same
 * inputs always give the same actions, and acting on them twice is harmless (creates of an existing
 * volume and deletes of a missing one are skipped by the runner).
 */
export function planVolumes(
  claims: PersistentVolumeClaim[],
  volumes: PersistentVolume[],
  classes: StorageClass[],
  volumesDir: string,
): VolumeAction[] {
  const ours = new Map(
    classes.filter((c) => c.provisioner === LOCAL_PROVISIONER).map((c) => [c.metadata.name, c]),
  );
  const existing = new Set(volumes.map((v) => v.metadata.name));
  const actions: VolumeAction[] = [];
  for (const pvc of claims) {
    const cls = ours.get(pvc.spec?.storageClassName ?? "");
    const uid = pvc.metadata.uid;
    if (!cls || !uid || pvc.metadata.deletionTimestamp) continue;
    if ((pvc.status?.phase ?? "Pending") !== "Pending" || pvc.spec?.volumeName) continue;
    // A selector asks for a pre-made volume; dynamic provisioners leave such claims alone.
    if (pvc.spec?.selector) continue;
    if ((pvc.spec?.volumeMode ?? "Filesystem") !== "Filesystem") continue;
    const node = pvc.metadata.annotations?.[SELECTED_NODE];
    if (cls.volumeBindingMode === "WaitForFirstConsumer" && !node) continue;
    const storage = pvc.spec?.resources?.requests?.storage;
    if (!storage) continue;
    const name = `pvc-${uid}`;
    if (existing.has(name)) continue;
    const dir = join(volumesDir, name);
    actions.push({
      type: "create",
      dir,
      volume: {
        apiVersion: "v1",
        kind: "PersistentVolume",
        metadata: { name, annotations: { [PROVISIONED_BY]: LOCAL_PROVISIONER } },
        spec: {
          capacity: { storage: String(storage) },
          accessModes: pvc.spec?.accessModes?.length ? pvc.spec.accessModes : ["ReadWriteOnce"],
          persistentVolumeReclaimPolicy: cls.reclaimPolicy ?? "Delete",
          storageClassName: cls.metadata.name,
          volumeMode: "Filesystem",
          hostPath: { path: dir, type: "DirectoryOrCreate" },
          claimRef: {
            apiVersion: "v1",
            kind: "PersistentVolumeClaim",
            namespace: pvc.metadata.namespace,
            name: pvc.metadata.name,
            uid,
          },
          nodeAffinity: node
            ? {
                required: {
                  nodeSelectorTerms: [
                    { matchExpressions: [{ key: "kubernetes.io/hostname", operator: "In", values: [node] }] },
                  ],
                },
              }
            : undefined,
        },
      },
    });
  }
  for (const pv of volumes) {
    if (pv.metadata.annotations?.[PROVISIONED_BY] !== LOCAL_PROVISIONER || pv.metadata.deletionTimestamp)
      continue;
    if (pv.status?.phase !== "Released" || pv.spec?.persistentVolumeReclaimPolicy !== "Delete") continue;
    actions.push({
      type: "delete",
      name: pv.metadata.name ?? "",
      dir: ownDir(volumesDir, pv.spec?.hostPath?.path),
    });
  }
  return actions;
}

/** Options of the provisioner loop. */
export interface LocalProvisionerOptions {
  client: KubeClient;
  /** The directory volumes are created in (the env's `volumes/`). */
  volumesDir: string;
  log: Logger;
  clock?: Clock;
  /** Full resync period, besides the watch events (default 10 s). */
  resyncMs?: number;
}

/**
 * The provisioner loop: watches claims and volumes, and on every change (coalesced over 50 ms) or
 * resync lists them and carries out `planVolumes`. Stops when `stop()` is called.
 */
export class LocalProvisioner {
  private readonly opts: Required<Omit<LocalProvisionerOptions, "clock">> & { clock: Clock };
  private readonly abort = new AbortController();
  private wake: (() => void) | undefined;
  private dirty = false;
  private isSynced = false;

  constructor(opts: LocalProvisionerOptions) {
    this.opts = { resyncMs: 10_000, clock: realClock, ...opts };
  }

  /** True once the first full sync has succeeded. */
  get synced(): boolean {
    return this.isSynced;
  }

  /** Run until `stop()`. */
  async run(): Promise<void> {
    const signal = this.abort.signal;
    const watches = [this.watch(PersistentVolumeClaims, signal), this.watch(PersistentVolumes, signal)];
    while (!signal.aborted) {
      this.dirty = false;
      try {
        await this.syncOnce();
        this.isSynced = true;
      } catch (err) {
        this.opts.log.error({ err: String(err) }, "sync failed");
      }
      if (!this.dirty) await this.sleepUntilWoken(this.opts.resyncMs);
      // Let a burst of events (a StatefulSet's claims) arrive before the next full list.
      if (!signal.aborted) await sleep(50, this.opts.clock);
    }
    await Promise.allSettled(watches);
  }

  stop(): void {
    this.abort.abort();
    this.wake?.();
  }

  /** One full pass: list claims, volumes and classes, then create and delete as planned. */
  async syncOnce(): Promise<void> {
    const { client, volumesDir, log } = this.opts;
    const [claims, volumes, classes] = await Promise.all([
      client.listAll(PersistentVolumeClaims),
      client.listAll(PersistentVolumes),
      client.listAll(StorageClasses),
    ]);
    for (const a of planVolumes(claims.items, volumes.items, classes.items, volumesDir)) {
      if (a.type === "create") {
        await mkdir(a.dir, { recursive: true });
        try {
          await client.create(a.volume);
          const ref = a.volume.spec?.claimRef;
          log.info(
            { volume: a.volume.metadata.name, claim: `${ref?.namespace}/${ref?.name}` },
            "provisioned",
          );
        } catch (err) {
          if (!(err instanceof AlreadyExistsError)) throw err;
        }
      } else {
        try {
          await client.delete(PersistentVolumes, a.name);
          log.info({ volume: a.name }, "deleted released volume");
        } catch (err) {
          if (!(err instanceof NotFoundError)) throw err;
        }
        if (a.dir) await rm(a.dir, { recursive: true, force: true });
      }
    }
  }

  private sleepUntilWoken(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const clock = this.opts.clock;
      const handle: { timer?: TimerHandle } = {};
      const done = (): void => {
        if (handle.timer) clock.clearTimeout(handle.timer);
        this.wake = undefined;
        resolve();
      };
      handle.timer = clock.setTimeout(done, ms);
      this.wake = done;
    });
  }

  private trigger(): void {
    this.dirty = true;
    this.wake?.();
  }

  /** Watch one kind and wake the loop on every event; re-list and re-watch after errors or timeouts. */
  private async watch(kind: KindRef, signal: AbortSignal): Promise<void> {
    const { client, log, clock } = this.opts;
    while (!signal.aborted) {
      try {
        const list = await client.list(kind, { limit: 1, signal });
        this.trigger();
        const events = await client.watch(kind, {
          resourceVersion: list.metadata?.resourceVersion,
          allowWatchBookmarks: false,
          timeoutSeconds: 300,
          signal,
        });
        for await (const _ of events) this.trigger();
      } catch (err) {
        if (signal.aborted) return;
        log.warn({ kind: kind.kind, err: String(err) }, "watch ended; re-listing");
        await sleep(1_000, clock);
      }
    }
  }
}
