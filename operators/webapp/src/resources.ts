/**
 * The children a WebApp wants, as pure functions of it and of its database credentials (seed 004: a
 * Deployment, a StatefulSet, a ConfigMap, a Secret, a Service and an Ingress; the StatefulSet also
 * needs its headless Service). Only fields the operator means to own are stated: server-side apply
 * leaves the rest (a Service's clusterIP, defaults) to the API server. Nothing here reads the cluster
 * or generates randomness; the controller supplies the credentials (src/credentials.ts).
 */
import { createHash } from "node:crypto";
import type {
  ConfigMap,
  DeepReadonly,
  Deployment,
  Ingress,
  PersistentVolumeClaim,
  Secret,
  Service,
  StatefulSet,
} from "opkit";
import type { WebAppObject } from "./api/v1alpha1/webapp.ts";
import { TIER_SETTINGS, type TierSettings } from "./tiers.ts";

type App = DeepReadonly<WebAppObject>;

export const NAME_LABEL = "app.kubernetes.io/name";
export const INSTANCE_LABEL = "app.kubernetes.io/instance";
export const COMPONENT_LABEL = "app.kubernetes.io/component";
export const MANAGED_BY_LABEL = "app.kubernetes.io/managed-by";
export const MANAGER = "webapp-operator";

/** On the app's pod template: the config file's hash, so a changed config rolls the pods. */
export const CONFIG_HASH_ANNOTATION = "workloads.apps.acme.com/config-hash";

/** The PostgreSQL image the database runs (the operator's choice, not the user's). */
export const POSTGRES_IMAGE = "postgres:17.6-alpine";
export const DATABASE_NAME = "app";
export const DATABASE_PORT = 5432;
export const APP_PORT = 8080;
/** Where the ConfigMap's file appears in the app container. */
export const CONFIG_DIR = "/etc/webapp";
export const CONFIG_FILE = "config.yaml";
/** The keys of the credentials Secret. */
export const USERNAME_KEY = "username";
export const PASSWORD_KEY = "password";

/** The database credentials as stored in the Secret (plain strings; the Secret encodes them). */
export interface Credentials {
  readonly username: string;
  readonly password: string;
}

/** The children's names, all derived from the WebApp's name. */
export function names(app: App) {
  const name = app.metadata.name ?? "";
  return {
    deployment: name,
    service: name,
    ingress: name,
    configMap: `${name}-config`,
    secret: `${name}-db-credentials`,
    statefulSet: `${name}-db`,
    databaseService: `${name}-db`,
  };
}

export function labelsFor(app: App, component: "app" | "database"): Record<string, string> {
  return {
    [NAME_LABEL]: "webapp",
    [INSTANCE_LABEL]: app.metadata.name ?? "",
    [COMPONENT_LABEL]: component,
    [MANAGED_BY_LABEL]: MANAGER,
  };
}

/** The pods' selector: the labels minus managed-by (a selector cannot change after creation). */
function selectorFor(app: App, component: "app" | "database"): Record<string, string> {
  const { [MANAGED_BY_LABEL]: _, ...selector } = labelsFor(app, component);
  return selector;
}

export function tierOf(app: App): TierSettings {
  return TIER_SETTINGS[app.spec.deploymentTier];
}

function meta(app: App, name: string, component: "app" | "database") {
  return { name, namespace: app.metadata.namespace, labels: labelsFor(app, component) };
}

/** The application's config file: where its database is, its host name and log level. */
export function configFile(app: App): string {
  const n = names(app);
  return [
    `# Written by ${MANAGER} from WebApp ${app.metadata.name ?? ""}; edits are overwritten.`,
    `hostname: ${app.spec.webAppHostname}`,
    `tier: ${app.spec.deploymentTier}`,
    `logLevel: ${tierOf(app).logLevel}`,
    `listen: ":${APP_PORT}"`,
    "database:",
    `  host: ${n.databaseService}`,
    `  port: ${DATABASE_PORT}`,
    `  name: ${DATABASE_NAME}`,
    `  credentialsFrom: env DB_USER, DB_PASSWORD`,
    "",
  ].join("\n");
}

export function desiredConfigMap(app: App): ConfigMap {
  return {
    apiVersion: "v1",
    kind: "ConfigMap",
    metadata: meta(app, names(app).configMap, "app"),
    data: { [CONFIG_FILE]: configFile(app) },
  };
}

export function desiredSecret(app: App, creds: Credentials): Secret {
  return {
    apiVersion: "v1",
    kind: "Secret",
    metadata: meta(app, names(app).secret, "database"),
    type: "Opaque",
    data: {
      [USERNAME_KEY]: Buffer.from(creds.username).toString("base64"),
      [PASSWORD_KEY]: Buffer.from(creds.password).toString("base64"),
    },
  };
}

function secretEnv(app: App, name: string, key: string) {
  return { name, valueFrom: { secretKeyRef: { name: names(app).secret, key } } };
}

export function desiredDeployment(app: App): Deployment {
  const n = names(app);
  const labels = labelsFor(app, "app");
  const hash = createHash("sha256").update(configFile(app)).digest("hex").slice(0, 16);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: meta(app, n.deployment, "app"),
    spec: {
      replicas: app.spec.webAppReplicas ?? 2,
      selector: { matchLabels: selectorFor(app, "app") },
      template: {
        metadata: { labels, annotations: { [CONFIG_HASH_ANNOTATION]: hash } },
        spec: {
          securityContext: { seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "app",
              image: app.spec.webAppImage,
              ports: [{ name: "http", containerPort: APP_PORT, protocol: "TCP" }],
              env: [
                { name: "WEBAPP_CONFIG", value: `${CONFIG_DIR}/${CONFIG_FILE}` },
                { name: "DB_HOST", value: n.databaseService },
                { name: "DB_PORT", value: String(DATABASE_PORT) },
                { name: "DB_NAME", value: DATABASE_NAME },
                secretEnv(app, "DB_USER", USERNAME_KEY),
                secretEnv(app, "DB_PASSWORD", PASSWORD_KEY),
              ],
              volumeMounts: [{ name: "config", mountPath: CONFIG_DIR, readOnly: true }],
              resources: structuredClone(tierOf(app).app),
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
            },
          ],
          volumes: [{ name: "config", configMap: { name: n.configMap } }],
        },
      },
    },
  };
}

/**
 * The database's volume claim templates: none for an ephemeral tier, one `data` claim otherwise.
 * Kubernetes cannot change them on a live StatefulSet, so the controller compares their signature.
 */
export function claimTemplates(app: App): PersistentVolumeClaim[] {
  const storage = tierOf(app).storage;
  if (storage.kind === "ephemeral") return [];
  return [
    {
      apiVersion: "v1",
      kind: "PersistentVolumeClaim",
      metadata: { name: "data", labels: selectorFor(app, "database") },
      spec: {
        accessModes: ["ReadWriteOnce"],
        resources: { requests: { storage: storage.size } },
      },
    },
  ];
}

/**
 * What the StatefulSet's claim templates amount to: names and sizes, sorted. Equal signatures mean
 * the live StatefulSet can be updated in place; different ones mean it must be replaced.
 */
export function storageSignature(
  templates: readonly DeepReadonly<{
    metadata?: { name?: string };
    spec?: { resources?: { requests?: Record<string, unknown> } };
  }>[],
): string {
  return templates
    .map((t) => {
      const size = t.spec?.resources?.requests?.storage;
      return `${t.metadata?.name ?? ""}=${typeof size === "string" || typeof size === "number" ? size : ""}`;
    })
    .sort()
    .join(",");
}

export function desiredStatefulSet(app: App): StatefulSet {
  const n = names(app);
  const tier = tierOf(app);
  const storage = tier.storage;
  return {
    apiVersion: "apps/v1",
    kind: "StatefulSet",
    metadata: meta(app, n.statefulSet, "database"),
    spec: {
      serviceName: n.databaseService,
      replicas: 1,
      selector: { matchLabels: selectorFor(app, "database") },
      // The claims follow the StatefulSet: deleting it (with the WebApp) deletes them.
      persistentVolumeClaimRetentionPolicy: { whenDeleted: "Delete", whenScaled: "Retain" },
      template: {
        metadata: { labels: labelsFor(app, "database") },
        spec: {
          securityContext: { fsGroup: 70, seccompProfile: { type: "RuntimeDefault" } },
          containers: [
            {
              name: "postgres",
              image: POSTGRES_IMAGE,
              ports: [{ name: "postgres", containerPort: DATABASE_PORT, protocol: "TCP" }],
              env: [
                secretEnv(app, "POSTGRES_USER", USERNAME_KEY),
                secretEnv(app, "POSTGRES_PASSWORD", PASSWORD_KEY),
                { name: "POSTGRES_DB", value: DATABASE_NAME },
                { name: "PGDATA", value: "/var/lib/postgresql/data/pgdata" },
              ],
              readinessProbe: {
                exec: { command: ["sh", "-c", 'pg_isready -h 127.0.0.1 -U "$POSTGRES_USER" -d app'] },
                periodSeconds: 10,
              },
              volumeMounts: [{ name: "data", mountPath: "/var/lib/postgresql/data" }],
              resources: structuredClone(tier.database),
              securityContext: { allowPrivilegeEscalation: false },
            },
          ],
          volumes:
            storage.kind === "ephemeral"
              ? [{ name: "data", emptyDir: { sizeLimit: storage.sizeLimit } }]
              : undefined,
        },
      },
      volumeClaimTemplates: claimTemplates(app),
    },
  };
}

/** The headless Service that gives the database pod its stable DNS name. */
export function desiredDatabaseService(app: App): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: meta(app, names(app).databaseService, "database"),
    spec: {
      clusterIP: "None",
      selector: selectorFor(app, "database"),
      ports: [{ name: "postgres", port: DATABASE_PORT, targetPort: "postgres", protocol: "TCP" }],
    },
  };
}

export function desiredService(app: App): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: meta(app, names(app).service, "app"),
    spec: {
      type: "ClusterIP",
      selector: selectorFor(app, "app"),
      ports: [{ name: "http", port: 80, targetPort: "http", protocol: "TCP" }],
    },
  };
}

export function desiredIngress(app: App): Ingress {
  const n = names(app);
  return {
    apiVersion: "networking.k8s.io/v1",
    kind: "Ingress",
    metadata: meta(app, n.ingress, "app"),
    spec: {
      rules: [
        {
          host: app.spec.webAppHostname,
          http: {
            paths: [
              {
                path: "/",
                pathType: "Prefix",
                backend: { service: { name: n.service, port: { name: "http" } } },
              },
            ],
          },
        },
      ],
    },
  };
}
