/**
 * Memcached (cache.example.com/v1alpha1, namespaced): seed 003's resource, defined once. `spec.size` is
 * how many memcached pods run; `status.nodes` lists their names, sorted.
 */
import * as Type from "typebox/type";
import { conditions, defineKind, type ObjectOf } from "opkit";

export const MAX_SIZE = 50;

export const Memcached = defineKind({
  group: "cache.example.com",
  version: "v1alpha1",
  kind: "Memcached",
  scope: "Namespaced",
  description: "Memcached runs `size` memcached pods and lists them in its status.",
  spec: Type.Object({
    size: Type.Integer({
      minimum: 0,
      maximum: MAX_SIZE,
      format: "int32",
      description: `How many memcached pods to run (0 to ${MAX_SIZE}).`,
    }),
  }),
  status: Type.Object({
    observedGeneration: Type.Optional(Type.Integer({ description: "The generation this status describes." })),
    nodes: Type.Optional(
      Type.Array(Type.String(), {
        description: "The names of the memcached pods, sorted.",
        maxItems: MAX_SIZE * 4,
      }),
    ),
    conditions: Type.Optional(conditions()),
  }),
  printerColumns: [
    { name: "Size", type: "integer", jsonPath: ".spec.size" },
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
});

export type MemcachedObject = ObjectOf<typeof Memcached>;
