/**
 * A realistic Pod for the cache figures: labels, annotations, one container with env, ports, resources
 * and probes, as a Deployment's pod looks after the API server's defaulting. `schedulerName` names no
 * running scheduler, so the pods stay Pending and nothing else writes them while they are measured.
 */
import type { Pod } from "opkit";

/** The scheduler no one runs: pods created with it stay Pending. */
export const NO_SCHEDULER = "bench-none";

/** One realistic Pod named `name` in `namespace`; `i` varies its values. */
export function realisticPod(namespace: string, name: string, i: number): Pod {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name,
      namespace,
      labels: {
        app: `web-${i % 50}`,
        "app.kubernetes.io/name": "web",
        "app.kubernetes.io/instance": `web-${i % 50}`,
        "pod-template-hash": "5d8f7c9b6d",
        tier: "frontend",
      },
      annotations: {
        "kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z",
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "9090",
      },
    },
    spec: {
      schedulerName: NO_SCHEDULER,
      containers: [
        {
          name: "web",
          image: "registry.example.com/team/web:1.27.3",
          ports: [
            { name: "http", containerPort: 8080, protocol: "TCP" },
            { name: "metrics", containerPort: 9090, protocol: "TCP" },
          ],
          env: [
            { name: "LOG_LEVEL", value: "info" },
            { name: "PORT", value: "8080" },
            { name: "INSTANCE", value: `web-${i}` },
            { name: "POD_NAME", valueFrom: { fieldRef: { fieldPath: "metadata.name" } } },
            { name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
          ],
          resources: {
            requests: { cpu: "100m", memory: "128Mi" },
            limits: { cpu: "500m", memory: "256Mi" },
          },
          readinessProbe: { httpGet: { path: "/healthz", port: 8080 }, periodSeconds: 5 },
        },
      ],
    },
  };
}
