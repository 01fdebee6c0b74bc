/**
 * The children an AppService wants, as pure functions of it (seed 001's NewDeploy and NewService):
 * a Deployment of `size` pods labelled `app: <name>` whose container ports come from the ports'
 * targetPorts, and a NodePort Service of the same name with the AppService's ports. Only fields the
 * operator means to own are stated: server-side apply leaves the rest (the Service's clusterIP, an
 * allocated nodePort, defaults) to the API server.
 */
import type { DeepReadonly, Deployment, Service } from "opkit";
import type { AppServiceObject } from "./api/v1/appservice.ts";

type App = DeepReadonly<AppServiceObject>;

export function labelsFor(app: App): Record<string, string> {
  return { app: app.metadata.name ?? "" };
}

/** Container ports: a numeric targetPort is the port; a named one names the container port; none means `port`. */
export function containerPorts(app: App) {
  const out: { containerPort: number; protocol: string; name?: string }[] = [];
  const seen = new Set<string>();
  for (const p of app.spec.ports ?? []) {
    const protocol = p.protocol ?? "TCP";
    const named = typeof p.targetPort === "string" ? p.targetPort : undefined;
    const containerPort = typeof p.targetPort === "number" ? p.targetPort : p.port;
    // Two Service ports may target one container port; the container declares it once.
    const key = `${containerPort}/${protocol}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ containerPort, protocol, ...(named ? { name: named } : {}) });
  }
  return out;
}

export function desiredDeployment(app: App): Deployment {
  const labels = labelsFor(app);
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name: app.metadata.name, namespace: app.metadata.namespace, labels },
    spec: {
      replicas: app.spec.size,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          containers: [
            {
              name: app.metadata.name ?? "app",
              image: app.spec.image,
              imagePullPolicy: "IfNotPresent",
              ports: containerPorts(app),
            },
          ],
        },
      },
    },
  } as Deployment;
}

export function desiredService(app: App): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: app.metadata.name, namespace: app.metadata.namespace, labels: labelsFor(app) },
    spec: {
      type: "NodePort",
      selector: labelsFor(app),
      ports: (app.spec.ports ?? []).map((p) => ({ ...p })),
    },
  };
}
