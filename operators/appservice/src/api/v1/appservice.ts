/**
 * AppService (kosmos.io/v1, namespaced): seed 001's resource, defined once. Its spec is the seed's —
 * size, image, and Service ports typed by the built-in `corev1.ServicePort` — and its status mirrors the
 * Deployment's (replicas, ready, available, updated) next to the AppService's own observedGeneration
 * and conditions.
 */
import * as Type from "typebox/type";
import { conditions, defineKind, listType, type ObjectOf } from "opkit";
import * as corev1 from "opkit/schemas/core/v1";

const count = (description: string) =>
  Type.Optional(Type.Integer({ minimum: 0, format: "int32", description }));

export const AppService = defineKind({
  group: "kosmos.io",
  version: "v1",
  kind: "AppService",
  scope: "Namespaced",
  description:
    "AppService runs an image as a Deployment of `size` pods and exposes it through a NodePort Service.",
  spec: Type.Object({
    size: Type.Integer({ minimum: 0, maximum: 1000, format: "int32", description: "How many pods to run." }),
    image: Type.String({ minLength: 1, description: "The container image, e.g. nginx:1.7.9." }),
    // Merged by (port, protocol) as a Service's own ports are, so server-side apply edits one port at a time.
    ports: Type.Optional(
      listType(
        Type.Array(corev1.ServicePort, {
          maxItems: 64,
          description: "The Service's ports; each targetPort becomes a container port.",
        }),
        "map",
        ["port", "protocol"],
      ),
    ),
  }),
  status: Type.Object({
    observedGeneration: Type.Optional(
      Type.Integer({ description: "The AppService generation this status describes." }),
    ),
    replicas: count("Pods of the Deployment (not terminated)."),
    readyReplicas: count("Pods of the Deployment that are ready."),
    availableReplicas: count("Pods of the Deployment that are available."),
    updatedReplicas: count("Pods of the Deployment with the current template."),
    unavailableReplicas: count("Pods of the Deployment still needed for full availability."),
    conditions: Type.Optional(
      conditions({
        description: "The Deployment's conditions (Available, Progressing, ...) and the operator's Ready.",
      }),
    ),
  }),
  printerColumns: [
    { name: "Size", type: "integer", jsonPath: ".spec.size" },
    { name: "Ready", type: "integer", jsonPath: ".status.readyReplicas" },
    { name: "Image", type: "string", jsonPath: ".spec.image", priority: 1 },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
});

export type AppServiceObject = ObjectOf<typeof AppService>;
