/**
 * WebApp (workloads.apps.acme.com/v1alpha1, namespaced): seed 004's resource (example 11-1), defined
 * once. The spec is the seed's — `deploymentTier` (dev|stg|prod), `webAppHostname`, `webAppImage`
 * (those three required) and `webAppReplicas` (default 2) — and the status keeps the seed's `created`
 * flag next to a condition per child and the overall Ready.
 */
import * as Type from "typebox/type";
import { conditions, defineKind, stringEnum, type ObjectOf } from "opkit";

/** The tiers of the seed; each chooses resources, storage and the log level (see src/tiers.ts). */
export const TIERS = ["dev", "stg", "prod"] as const;
export type Tier = (typeof TIERS)[number];

export const MAX_REPLICAS = 100;

export const WebApp = defineKind({
  group: "workloads.apps.acme.com",
  version: "v1alpha1",
  kind: "WebApp",
  scope: "Namespaced",
  description:
    "WebApp is the Schema for the webapps API: a web application with its PostgreSQL database, configuration, credentials, Service and Ingress.",
  spec: Type.Object(
    {
      deploymentTier: stringEnum(TIERS, {
        description:
          "dev (ephemeral database storage, small resources), stg or prod (persistent database volumes, larger resources).",
      }),
      webAppHostname: Type.String({
        minLength: 1,
        maxLength: 253,
        description: "The host name the Ingress routes to the application, e.g. app.acme.com.",
      }),
      webAppImage: Type.String({
        minLength: 1,
        maxLength: 512,
        description: "The application's container image, e.g. registry.acme.com/app/app:v1.4.",
      }),
      webAppReplicas: Type.Optional(
        Type.Integer({
          minimum: 0,
          maximum: MAX_REPLICAS,
          format: "int32",
          default: 2,
          description: `How many application pods to run (0 to ${MAX_REPLICAS}).`,
        }),
      ),
    },
    { description: "WebAppSpec defines the desired state of WebApp" },
  ),
  status: Type.Object(
    {
      created: Type.Optional(
        Type.Boolean({ description: "Every child has been created (the seed's flag; stays true)." }),
      ),
      observedGeneration: Type.Optional(
        Type.Integer({ description: "The WebApp generation this status describes." }),
      ),
      conditions: Type.Optional(
        conditions({
          description:
            "Ready, one <Child>Ready per child (DeploymentReady, DatabaseReady, ...), and Conflict when a child's name is taken by an object the WebApp does not own.",
        }),
      ),
    },
    { description: "WebAppStatus defines the observed state of WebApp" },
  ),
  printerColumns: [
    { name: "Tier", type: "string", jsonPath: ".spec.deploymentTier" },
    { name: "Replicas", type: "integer", jsonPath: ".spec.webAppReplicas" },
    { name: "Host", type: "string", jsonPath: ".spec.webAppHostname" },
    { name: "Ready", type: "string", jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: "Image", type: "string", jsonPath: ".spec.webAppImage", priority: 1 },
    { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
  ],
});

export type WebAppObject = ObjectOf<typeof WebApp>;
