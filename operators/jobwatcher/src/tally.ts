/**
 * Deletions not yet written into a watcher's `status.jobsDeleted`, shared by the Job controller (which
 * deletes) and the watcher controllers (which write status). A Job's DELETED event wakes the watcher
 * credited with it, so a burst of deletions becomes one status write per watcher.
 *
 * Counts are kept per watcher UID, so a watcher deleted and created again under the same name starts at
 * zero. If the process dies between a delete and the status write, those few counts are lost: the count
 * is a report, not a ledger.
 */
import type { Request } from "opkit";
import type { WatcherRef } from "./policy.ts";

/** Remember at most this many Jobs deleted but not yet seen deleted by the watch. */
const MAX_AWAITED = 10_000;

export class DeletionTally {
  readonly #pending = new Map<string, number>();
  readonly #written = new Map<string, number>();
  readonly #byJob = new Map<string, WatcherRef>();

  readonly #inflight = new Map<string, number>();

  /**
   * A delete of the Job is about to be sent because of `watcher`'s TTL. Recorded first, because the
   * Job's DELETED event may arrive before the delete call returns, and that event must find the watcher.
   */
  expect(jobUid: string, watcher: WatcherRef): void {
    this.#inflight.set(watcher.uid, (this.#inflight.get(watcher.uid) ?? 0) + 1);
    this.#byJob.set(jobUid, watcher);
    if (this.#byJob.size > MAX_AWAITED) {
      const oldest = this.#byJob.keys().next().value;
      if (oldest !== undefined) this.#byJob.delete(oldest);
    }
  }

  /** The delete announced by `expect` succeeded (`deleted`) or did not (someone else's, or refused). */
  settle(watcher: WatcherRef, deleted: boolean): void {
    const left = (this.#inflight.get(watcher.uid) ?? 0) - 1;
    if (left > 0) this.#inflight.set(watcher.uid, left);
    else this.#inflight.delete(watcher.uid);
    // On failure the Job's entry stays: another delete of the same Job (the Job controller and a
    // watcher's run can race) may have succeeded, and its DELETED event must still find the watcher.
    if (deleted) this.#pending.set(watcher.uid, (this.#pending.get(watcher.uid) ?? 0) + 1);
  }

  /** Deletes credited to the watcher that are still on their way: its count is not final yet. */
  inflight(watcherUid: string): number {
    return this.#inflight.get(watcherUid) ?? 0;
  }

  /** The watcher of `kind` to wake for a Job's DELETED event, if we deleted that Job. */
  wake(jobUid: string | undefined, kind: WatcherRef["kind"]): Request[] {
    const ref = jobUid ? this.#byJob.get(jobUid) : undefined;
    if (!ref || ref.kind !== kind) return [];
    this.#byJob.delete(jobUid as string);
    return [{ namespace: ref.namespace, name: ref.name }];
  }

  /** The count to write: never below what the status says or what we wrote last, plus what is pending. */
  total(watcherUid: string, inStatus: number | undefined): { total: number; pending: number } {
    const pending = this.#pending.get(watcherUid) ?? 0;
    const base = Math.max(inStatus ?? 0, this.#written.get(watcherUid) ?? 0);
    return { total: base + pending, pending };
  }

  /** `pending` deletions were written as `total`. */
  written(watcherUid: string, pending: number, total: number): void {
    const left = (this.#pending.get(watcherUid) ?? 0) - pending;
    if (left > 0) this.#pending.set(watcherUid, left);
    else this.#pending.delete(watcherUid);
    this.#written.set(watcherUid, total);
  }
}
