/**
 * The manager's lifecycle as data: one phase value, each carrying what that phase needs, changed only
 * by `managerStep`. It does no I/O, so the order rules (no start after a stop, leadership lost at most
 * once, a stop remembered with what it found) are unit-tested without a server.
 *
 *   created ──start──► starting ──leader work──► leading ──lost──► lost
 *      │                  │                         │               │
 *      └──────────────────┴───────── stop ──────────┴───────────────┴──► stopping ──► stopped
 */

/** Where a manager is in its life. */
export type ManagerPhase<E = Error, U = Error> =
  /** Controllers and runnables may still be added. */
  | { readonly name: "created" }
  /** Servers, informers and wiring are opening (`opening`), caches syncing, or waiting for leadership. */
  | { readonly name: "starting"; readonly opening: Promise<void> | undefined }
  /** Controllers and leader runnables run. */
  | { readonly name: "leading"; readonly opening: Promise<void> | undefined }
  /** Leadership was lost: every reconcile was aborted; a stop follows. */
  | {
      readonly name: "lost";
      readonly opening: Promise<void> | undefined;
      readonly lost: E;
      readonly leaderWorkStarted: boolean;
    }
  /** A stop runs (`done` resolves when it finished); what it found is kept for `run`'s verdict. */
  | ({ readonly name: "stopping" } & StopRecord<E>)
  /** Stopped; `unclean` when work was abandoned at the end of the grace period. */
  | ({ readonly name: "stopped"; readonly unclean: U | undefined } & StopRecord<E>);

/** What a stop keeps of the phase it began in. */
export interface StopRecord<E> {
  /** The stop in progress or done; a second stop returns it. */
  readonly done: Promise<void>;
  /** The opening the stop waits for before tearing down. */
  readonly opening: Promise<void> | undefined;
  /** `start` was called (before or after the stop): no more `add`. */
  readonly started: boolean;
  /** Leader work had started when the stop began (a standby stops campaigning at once instead). */
  readonly leaderWorkStarted: boolean;
  /** Leadership lost, before or during the stop. */
  readonly lost: E | undefined;
}

/** What happened to a manager. */
export type ManagerEvent<E = Error, U = Error> =
  | { readonly type: "start"; readonly opening: Promise<void> }
  | { readonly type: "leaderWork" }
  | { readonly type: "lost"; readonly error: E }
  | { readonly type: "stop"; readonly done: Promise<void> }
  | { readonly type: "stopped"; readonly unclean: U | undefined };

/** The phase of a new manager. */
export const CREATED: ManagerPhase<never, never> = { name: "created" };

/** The transition function of the manager's lifecycle. Events that do not apply leave the phase as it is. */
export function managerStep<E, U>(phase: ManagerPhase<E, U>, event: ManagerEvent<E, U>): ManagerPhase<E, U> {
  switch (event.type) {
    case "start":
      if (phase.name === "created" || phase.name === "starting")
        return { name: "starting", opening: event.opening };
      if (phase.name === "stopping" || phase.name === "stopped") return { ...phase, started: true };
      return phase;
    case "leaderWork":
      return phase.name === "starting" ? { name: "leading", opening: phase.opening } : phase;
    case "lost":
      if (phase.name === "leading" || phase.name === "starting")
        return {
          name: "lost",
          opening: phase.opening,
          lost: event.error,
          leaderWorkStarted: phase.name === "leading",
        };
      if (phase.name === "stopping" && phase.lost === undefined) return { ...phase, lost: event.error };
      return phase;
    case "stop":
      if (phase.name === "stopping" || phase.name === "stopped") return phase;
      return {
        name: "stopping",
        done: event.done,
        opening: phase.name === "created" ? undefined : phase.opening,
        started: phase.name !== "created",
        leaderWorkStarted: phase.name === "leading" || (phase.name === "lost" && phase.leaderWorkStarted),
        lost: phase.name === "lost" ? phase.lost : undefined,
      };
    case "stopped":
      return phase.name === "stopping" ? { ...phase, name: "stopped", unclean: event.unclean } : phase;
  }
}

/** Whether a stop was asked for: nothing new may open or start. */
export function stopRequested(phase: ManagerPhase<unknown, unknown>): boolean {
  return phase.name === "stopping" || phase.name === "stopped";
}

/** The lost leadership, if it was lost (before or during a stop). */
export function lostOf<E>(phase: ManagerPhase<E, unknown>): E | undefined {
  return phase.name === "lost" || phase.name === "stopping" || phase.name === "stopped"
    ? phase.lost
    : undefined;
}

/** Leader work runs and leadership was not lost (it keeps running through a graceful stop). */
export function isLeading(phase: ManagerPhase<unknown, unknown>): boolean {
  if (phase.name === "leading") return true;
  return (phase.name === "stopping" || phase.name === "stopped") && phase.leaderWorkStarted && !phase.lost;
}
