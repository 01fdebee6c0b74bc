/**
 * A small operator used by the manager's process tests: it copies every ConfigMap labelled
 * `opkit-test/source=true` in $NAMESPACE into a Secret `<name>-copy` owned by it, annotated with the
 * identity of the replica that reconciled it. Leader election on when $LEASE is set; $SLOW_MS makes
 * each reconcile take that long (to test graceful shutdown). Prints JSON logs on stdout.
 */
import { Manager, cacheKind, controller, applyOwned, kindRef, type KubeObject } from "../../index.ts";

const ns = process.env.NAMESPACE ?? "default";
const identity = process.env.IDENTITY ?? `copy-${process.pid}`;
const slowMs = Number(process.env.SLOW_MS ?? 0);
const ConfigMaps = kindRef<KubeObject & { data?: Record<string, string> }>("v1", "ConfigMap");
const Secrets = kindRef<KubeObject>("v1", "Secret");

const mgr = await Manager.create({
  kubeconfig: process.env.KUBECONFIG,
  name: "copy-operator",
  metrics: { host: "127.0.0.1", port: 0 },
  health: { host: "127.0.0.1", port: 0 },
  cache: {
    namespace: ns,
    kinds: [cacheKind(ConfigMaps, { labelSelector: "opkit-test/source=true" })],
  },
  gracefulShutdownMs: Number(process.env.GRACE_MS ?? 30_000),
  leaderElection: process.env.LEASE
    ? {
        name: process.env.LEASE,
        namespace: ns,
        identity,
        leaseDurationMs: 5_000,
        renewDeadlineMs: 4_000,
        retryPeriodMs: 1_000,
      }
    : false,
});

mgr.add(
  controller("copy")
    .for(ConfigMaps)
    .owns(Secrets)
    .reconcile(async (req, ctx) => {
      ctx.log.info({ event: "reconcile-start" }, "reconcile started");
      if (slowMs) await new Promise((r) => setTimeout(r, slowMs));
      const cm = ctx.cache.get(ConfigMaps, req.name, { namespace: req.namespace });
      if (!cm) return;
      await applyOwned(ctx.client, cm, {
        apiVersion: "v1",
        kind: "Secret",
        metadata: {
          name: `${req.name}-copy`,
          namespace: req.namespace,
          annotations: { "opkit-test/reconciled-by": identity },
        },
        stringData: { ...cm.data },
      });
      ctx.log.info({ event: "reconcile-end" }, "reconcile finished");
    }),
);

await mgr.run();
process.exit(0);
