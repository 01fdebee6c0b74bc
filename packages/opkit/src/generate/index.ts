/**
 * Code generation (the `opkit/generate` entry, controller-gen for opkit): CRDs from kind definitions,
 * TypeScript types from existing CRDs, RBAC and manifests. Build-time only, so operators do not load it.
 *
 * @module opkit/generate
 */
export * from "./crd-types.ts";
export * from "./crd.ts";
export * from "./types-from-crd.ts";
export * from "./rbac.ts";
export * from "./manifests.ts";
export * from "./helm.ts";
export * from "./dockerfile.ts";
export * from "./builtin-schemas.ts";
export * from "./monitoring.ts";
export * from "./compat.ts";
