/**
 * opkit — the operator kit for TypeScript.
 *
 * This is the one public entry: it re-exports the small surface users need. Internals stay in their
 * folders (client, cache, queue, controller, manager, helpers) and are not imported by path.
 * The local control plane lives in the `opkit/testenv` entry so that operators do not load it.
 */
export * from "./client/index.ts";
