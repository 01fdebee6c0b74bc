/**
 * Installing CustomResourceDefinitions the way `kubectl apply` + `kubectl wait --for=condition=Established`
 * does, and one step further: until the API server serves every version's resource. A CRD applied a
 * moment ago answers 404 or 429 for a while; an operator started then logs errors and backs off. Waiting
 * here (`opkit run --install-crds`, `opkit dev`, the test environment) means it starts on a served kind.
 */
import { realClock, sleep, type Clock } from "../clock/index.ts";
import type { KubeClient } from "./client.ts";
import { NotFoundError, TooManyRequestsError, UnknownKindError } from "./errors.ts";
import { kindRef, type KubeObject } from "./types.ts";

type CrdObject = KubeObject & {
  spec?: { group?: string; names?: { kind?: string }; versions?: Array<{ name?: string; served?: boolean }> };
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
};

const Crds = kindRef<CrdObject>("apiextensions.k8s.io/v1", "CustomResourceDefinition");

/** A CRD that did not become Established and served in time; says which condition it reports. */
export class CrdNotReadyError extends Error {
  /** The CRD's name (`<plural>.<group>`). */
  readonly crd: string;
  constructor(crd: string, detail: string) {
    super(`CRD ${crd} is not ready: ${detail}`);
    this.name = "CrdNotReadyError";
    this.crd = crd;
  }
}

/** Options of `installCrds`. */
export interface InstallCrdsOptions {
  /** How long to wait for every CRD to be Established and served (default 60 s). */
  timeoutMs?: number;
  /** Stops the apply and the wait; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Time source for the deadline and the polling (default the real clock). */
  clock?: Clock;
}

/**
 * Server-side apply each CRD (forcing ownership of its fields), then wait until each is Established
 * (names accepted) and a list of every served version answers, and drop the client's cached discovery
 * so the new kinds resolve. Throws CrdNotReadyError naming the CRD and its conditions on timeout (e.g.
 * NamesAccepted=False when another CRD holds the plural).
 */
export async function installCrds(
  client: KubeClient,
  crds: readonly KubeObject[],
  options: InstallCrdsOptions = {},
): Promise<void> {
  const clock = options.clock ?? realClock;
  const deadline = clock.now() + (options.timeoutMs ?? 60_000);
  for (const crd of crds) await client.apply(crd, { force: true, signal: options.signal });
  for (const crd of crds as readonly CrdObject[]) {
    const name = crd.metadata.name ?? "";
    let detail = "not seen yet";
    for (let delay = 50; ; delay = Math.min(delay * 2, 1_000)) {
      const live = await client.getOptional(Crds, name, { signal: options.signal });
      const conditions = live?.status?.conditions ?? [];
      if (conditions.some((c) => c.type === "Established" && c.status === "True")) break;
      detail =
        conditions.map((c) => `${c.type}=${c.status}${c.message ? ` (${c.message})` : ""}`).join(", ") ||
        detail;
      if (clock.now() > deadline) throw new CrdNotReadyError(name, detail);
      await sleep(clock, delay, options.signal);
    }
  }
  client.mapper.invalidate();
  for (const crd of crds as readonly CrdObject[]) {
    const group = crd.spec?.group ?? "";
    const kind = crd.spec?.names?.kind ?? "";
    for (const v of crd.spec?.versions ?? []) {
      if (v.served === false || !v.name) continue;
      const ref = kindRef(group ? `${group}/${v.name}` : v.name, kind);
      for (let delay = 50; ; delay = Math.min(delay * 2, 1_000)) {
        try {
          await client.list(ref, { limit: 1, signal: options.signal });
          break;
        } catch (err) {
          const notYet =
            err instanceof NotFoundError ||
            err instanceof TooManyRequestsError ||
            err instanceof UnknownKindError;
          if (!notYet) throw err;
          if (clock.now() > deadline)
            throw new CrdNotReadyError(
              crd.metadata.name ?? "",
              `${ref.apiVersion} ${kind} is not served yet`,
            );
          client.mapper.invalidate(ref.apiVersion);
          await sleep(clock, delay, options.signal);
        }
      }
    }
  }
}
