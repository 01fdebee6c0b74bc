/**
 * The local provisioner as a process of the env (component `local-provisioner`): started, probed,
 * restarted and stopped like the Go components, by the PID recorded in the env's state. It serves
 * `/healthz` on 127.0.0.1 once its first sync succeeded, and exits on SIGTERM or SIGINT.
 *
 * Usage: node provisioner.(ts|js) --kubeconfig=<path> --port=<port> --volumes-dir=<dir>
 */
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { KubeClient } from "../client/client.ts";
import { createLogger } from "../logging/index.ts";
import { LocalProvisioner } from "./storage.ts";

const { values } = parseArgs({
  options: {
    kubeconfig: { type: "string" },
    port: { type: "string" },
    "volumes-dir": { type: "string" },
  },
  strict: true,
});
const port = Number(values.port);
if (!values.kubeconfig || !values["volumes-dir"] || !Number.isInteger(port) || port <= 0 || port > 65535) {
  process.stderr.write("usage: provisioner --kubeconfig=<path> --port=<1-65535> --volumes-dir=<dir>\n");
  process.exit(2);
}

const log = createLogger({ name: "local-provisioner" });
const client = await KubeClient.load({
  kubeconfig: values.kubeconfig,
  fieldManager: "opkit-local-provisioner",
});
const provisioner = new LocalProvisioner({ client, volumesDir: values["volumes-dir"], log });

const server = createServer((req, res) => {
  const ok = req.url === "/healthz" && provisioner.synced;
  res.writeHead(ok ? 200 : req.url === "/healthz" ? 503 : 404, { "content-type": "text/plain" });
  res.end(ok ? "ok" : req.url === "/healthz" ? "not synced yet" : "not found");
});
server.listen(port, "127.0.0.1");

const stop = (): void => {
  provisioner.stop();
  server.close();
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);

log.info({ volumesDir: values["volumes-dir"] }, "local provisioner started");
await provisioner.run();
await client.close();
log.info("local provisioner stopped");
