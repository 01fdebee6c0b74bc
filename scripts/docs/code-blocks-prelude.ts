/**
 * The example kinds the guide's code blocks share, so a block can show a controller or a test without
 * repeating the kind's definition (code-blocks.ts imports these names into a block that uses them).
 */
import * as Type from "typebox/type";
import {
  conditions,
  controller,
  conversion,
  defineKind,
  type DeepReadonly,
  type Deployment,
  type ObjectOf,
} from "opkit";

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

/** The tutorial's pure function: the Deployment a Memcached should have. */
export function desiredDeployment(m: DeepReadonly<MemcachedObject>): Deployment {
  const labels = { "app.kubernetes.io/instance": m.metadata.name ?? "" };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: m.metadata.name, namespace: m.metadata.namespace, labels },
    spec: {
      replicas: m.spec.size,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: "memcached", image: m.spec.image }] } },
    },
  };
}

/** The tutorial's controller (its reconcile elided). */
export function memcachedController() {
  return controller("memcached")
    .for(Memcached)
    .reconcile(() => undefined);
}

/** Evolving your API: a two-version kind and its conversion (the page defines them in full). */
const webAppSpecV1alpha1 = Type.Object({ webAppImage: Type.String() });
const WebAppV1alpha1 = defineKind({
  group: "workloads.acme.com",
  version: "v1alpha1",
  kind: "WebApp",
  storage: false,
  spec: webAppSpecV1alpha1,
});
const WebAppV1beta1 = defineKind({
  group: "workloads.acme.com",
  version: "v1beta1",
  kind: "WebApp",
  storage: true,
  spec: Type.Object({ image: Type.String() }),
});

/** The page's conversion webhook between WebApp v1alpha1 and v1beta1. */
export const webAppConversion = conversion<ObjectOf<typeof WebAppV1beta1>, [ObjectOf<typeof WebAppV1alpha1>]>(
  {
    hub: WebAppV1beta1,
    spokes: [
      {
        kind: WebAppV1alpha1,
        toHub: (o) => ({ spec: { image: o.spec.webAppImage } }),
        fromHub: (h) => ({ spec: { webAppImage: h.spec.image } }),
      },
    ],
  },
);
