/**
 * opkit — the operator kit for TypeScript.
 *
 * This is the one public entry: it re-exports the small surface users need. Internals stay in their
 * folders and are not imported by path. Dependency direction (arrows point to what a folder imports):
 * clock ← queue ← controller ← manager; client ← cache ← controller; helpers → client, cache;
 * children → helpers. The local control plane lives in the `opkit/testenv` entry so that operators
 * do not load it.
 */
export * from "./client/index.ts";
export * from "./clock/index.ts";
export * from "./cache/index.ts";
export * from "./queue/index.ts";
export * from "./api/index.ts";
export * from "./events/index.ts";
export * from "./helpers/index.ts";
export * from "./children/index.ts";
export * from "./logging/index.ts";
export * from "./metrics/index.ts";
export * from "./controller/index.ts";
export * from "./webhook/index.ts";
export * from "./manager/index.ts";
