/**
 * The example kinds the guide's code blocks share, so a block can show a controller or a test without
 * repeating the kind's definition (code-blocks.ts imports these names into a block that uses them).
 */
import * as Type from "typebox/type";
import { conditions, defineKind, type ObjectOf } from "opkit";

/** The tutorial's kind. */
export const Memcached = defineKind({
  group: "cache.example.com",
  version: "v1alpha1",
  kind: "Memcached",
  plural: "memcacheds",
  spec: Type.Object({
    size: Type.Integer({ minimum: 1, default: 1 }),
    image: Type.String({ default: "memcached:1.6.38-alpine" }),
  }),
  status: Type.Object({
    observedGeneration: Type.Optional(Type.Integer()),
    conditions: Type.Optional(conditions()),
  }),
});

/** A Memcached object. */
export type MemcachedObject = ObjectOf<typeof Memcached>;
