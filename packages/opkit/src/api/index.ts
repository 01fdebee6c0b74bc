/**
 * Kind definitions: `defineKind` declares a custom kind once (its TypeScript type, `KindRef`, runtime
 * validation and CRD settings); the helpers in k8s.ts add what Kubernetes schemas know beyond JSON
 * Schema (int-or-string, list/map types, CEL rules, ...). TypeBox builds the schemas.
 */
export * from "./kind.ts";
export * from "./k8s.ts";
