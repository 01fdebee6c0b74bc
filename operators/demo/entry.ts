/**
 * What each seed operator contributes to `make demo`: its samples and how to read their progress. The
 * runner (operators/demo.ts) installs the CRDs, starts the operator, applies the samples and redraws
 * one table of these rows until every one has converged.
 */
import { readFile } from "node:fs/promises";
import { parse } from "yaml";
import type { KindRef, KubeClient, KubeObject, WebhookHandler } from "opkit";

export interface DemoContext {
  readonly client: KubeClient;
  /** The demo's namespace for namespaced samples. */
  readonly namespace: string;
  /** The operator's folder (operators/<name>). */
  readonly dir: string;
}

/** One line of the live table. */
export interface DemoRow {
  /** e.g. "AppService demo/appservice-sample". */
  readonly object: string;
  /** Phase or readiness, e.g. "2/2 ready", "Created". */
  readonly state: string;
  /** The children seen so far, e.g. "Deployment, Service". */
  readonly children: string;
  readonly converged: boolean;
  /** The object whose conditions and last Event explain it (and are shown when it does not converge). */
  readonly ref?: { kind: KindRef; name: string; namespace?: string };
}

export interface DemoEntry {
  /** The operator's folder name under operators/. */
  readonly name: string;
  /** The operator's admission/conversion webhooks: the demo serves them locally and registers them. */
  readonly webhooks?: readonly WebhookHandler[];
  /** Flags for the operator beyond kubeconfig, ports and log level. */
  args?(ctx: DemoContext): string[] | Promise<string[]>;
  /** Apply the seed's samples (as the seed wrote them, in the demo namespace). */
  apply(ctx: DemoContext): Promise<void>;
  /** The samples' progress, read live from the API server. */
  rows(ctx: DemoContext): Promise<DemoRow[]>;
}

/** A sample manifest of the operator, placed in the demo namespace when it is namespaced. */
export async function readSample<T extends KubeObject>(
  ctx: Pick<DemoContext, "dir" | "namespace">,
  file: string,
  namespaced = true,
): Promise<T> {
  const obj = parse(await readFile(`${ctx.dir}/config/samples/${file}`, "utf8")) as T;
  if (namespaced) obj.metadata.namespace = ctx.namespace;
  return obj;
}
