/** The children an AppService wants, as pure functions (no control plane). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { AppService } from "../src/api/v1/appservice.ts";
import { containerPorts, desiredDeployment, desiredService } from "../src/resources.ts";

const app = (ports: Parameters<typeof AppService.new>[1]["ports"]) =>
  AppService.new("shop", { size: 2, image: "nginx:1.7.9", ports }, { namespace: "team" });

test("the Deployment: size replicas, the image, app=<name> labels, container ports from targetPorts", () => {
  const d = desiredDeployment(app([{ port: 80, targetPort: 8080, protocol: "TCP" }]));
  assert.equal(d.spec?.replicas, 2);
  assert.deepEqual(d.spec?.selector.matchLabels, { app: "shop" });
  assert.deepEqual(d.spec?.template.metadata?.labels, { app: "shop" });
  assert.equal(d.spec?.template.spec?.containers[0]?.image, "nginx:1.7.9");
  assert.deepEqual(d.spec?.template.spec?.containers[0]?.ports, [{ containerPort: 8080, protocol: "TCP" }]);
  assert.equal(d.metadata.namespace, "team");
});

test("container ports: named targetPorts name the port, absent ones mean `port`, duplicates are declared once", () => {
  assert.deepEqual(
    containerPorts(
      app([
        { name: "web", port: 80, targetPort: "http", protocol: "TCP" },
        { name: "alt", port: 81 },
        { name: "dup", port: 82, targetPort: 81, protocol: "TCP" },
        { name: "dns", port: 53, targetPort: 53, protocol: "UDP" },
      ]),
    ),
    [
      { containerPort: 80, protocol: "TCP", name: "http" },
      { containerPort: 81, protocol: "TCP" },
      { containerPort: 53, protocol: "UDP" },
    ],
  );
});

test("the Service: NodePort, the spec's ports as given, no clusterIP of its own", () => {
  const s = desiredService(app([{ port: 80, targetPort: 80, nodePort: 30002, protocol: "TCP" }]));
  assert.equal(s.spec?.type, "NodePort");
  assert.deepEqual(s.spec?.ports, [{ port: 80, targetPort: 80, nodePort: 30002, protocol: "TCP" }]);
  assert.deepEqual(s.spec?.selector, { app: "shop" });
  assert.equal(s.spec?.clusterIP, undefined, "the API server keeps the one it allocated");
});
