/**
 * The reflector's resume state as data (kube-rs's watcher is the model): what the next round does —
 * the first list, a relist after 410 Gone, or a watch from a resourceVersion — and how many relists
 * came in a row without a working watch between them. `reflectorStep` is the one transition function;
 * it does no I/O, so every path (first sync, resume, 410 loop, recovery) is unit-tested without a server.
 */

/** Where the reflector stands between two rounds. */
export type ReflectorPhase =
  /** Nothing listed yet: the next round is the first list (not a relist; never backs off first). */
  | { readonly name: "initial" }
  /** The resume point expired (410 Gone): the next round relists, backing off when it is not the first in a row. */
  | { readonly name: "relisting"; readonly relistsInARow: number }
  /** Synced: the next round watches from `resourceVersion`, the last list, event or bookmark handed over. */
  | { readonly name: "watching"; readonly resourceVersion: string; readonly relistsInARow: number };

/** What happened, as the reflector reports it to `reflectorStep`. */
export type ReflectorInput =
  /** A list (paged, unpaged or streaming) is about to start. */
  | { readonly type: "listStarting" }
  /** A list completed at `resourceVersion` and replaced the store. */
  | { readonly type: "listed"; readonly resourceVersion: string }
  /** A watch event or bookmark was handed over (with its resourceVersion when it had one). */
  | { readonly type: "delivered"; readonly resourceVersion: string | undefined }
  /** The server answered 410 Gone: the resume point is too old. */
  | { readonly type: "gone" };

/** The next phase, and for `listStarting` whether that list is a relist and must back off first. */
export interface ReflectorStep {
  readonly phase: ReflectorPhase;
  /** The list about to start lists again after the first sync (counted in `relists`). */
  readonly relist: boolean;
  /** Relists in a row without a working watch between them (a 410 loop) must not spin: wait first. */
  readonly backoffFirst: boolean;
}

/** The phase a reflector starts in. */
export const INITIAL_PHASE: ReflectorPhase = { name: "initial" };

/** The transition function of the reflector: the phase after `input` happened in `phase`. */
export function reflectorStep(phase: ReflectorPhase, input: ReflectorInput): ReflectorStep {
  const to = (next: ReflectorPhase): ReflectorStep => ({ phase: next, relist: false, backoffFirst: false });
  switch (input.type) {
    case "listStarting":
      if (phase.name === "initial") return to(phase);
      return {
        phase: { name: "relisting", relistsInARow: phase.relistsInARow + 1 },
        relist: true,
        backoffFirst: phase.relistsInARow > 0,
      };
    case "listed":
      return to({
        name: "watching",
        resourceVersion: input.resourceVersion,
        relistsInARow: phase.name === "initial" ? 0 : phase.relistsInARow,
      });
    case "delivered":
      // A working watch: relists count from zero again, and the resume point moves with the event.
      if (input.resourceVersion !== undefined)
        return to({ name: "watching", resourceVersion: input.resourceVersion, relistsInARow: 0 });
      if (phase.name === "initial") return to(phase);
      return to({ ...phase, relistsInARow: 0 });
    case "gone":
      if (phase.name === "watching") return to({ name: "relisting", relistsInARow: phase.relistsInARow });
      return to(phase);
  }
}

/** The resourceVersion the next watch resumes from; undefined while a list is due. */
export function resumePoint(phase: ReflectorPhase): string | undefined {
  return phase.name === "watching" ? phase.resourceVersion : undefined;
}
