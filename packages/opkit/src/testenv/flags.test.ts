import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { componentArgs, componentExe, kwokConfigPath, provisionerScript } from "./flags.ts";
import { resolveSettings } from "./settings.ts";
import { COMPONENTS, type EnvState } from "./state.ts";

function state(opts: Parameters<typeof resolveSettings>[0] = {}): EnvState {
  const { nodes, settings } = resolveSettings(opts);
  return {
    name: "unit",
    dir: "/tmp/opkit-env-unit",
    kubernetesVersion: "v1.36.3",
    createdAt: "2026-01-01T00:00:00Z",
    nodes,
    advertiseAddress: "10.1.2.3",
    kubeconfig: "/tmp/opkit-env-unit/kubeconfig",
    server: "https://127.0.0.1:6443",
    ports: {
      etcd: 2379,
      etcdPeer: 2380,
      "kube-apiserver": 6443,
      "kube-controller-manager": 10257,
      "kube-scheduler": 10259,
      kwok: 10247,
      "local-provisioner": 10248,
    },
    components: {},
    settings,
  };
}

const flag = (args: string[], name: string): string | undefined =>
  args.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1);

describe("component flags", () => {
  it("gives kube-apiserver a /16 Service range, room for 65,534 Services", () => {
    const args = componentArgs(state(), "kube-apiserver");
    assert.equal(flag(args, "--service-cluster-ip-range"), "10.0.0.0/16");
    assert.equal(flag(args, "--secure-port"), "6443");
    assert.equal(flag(args, "--etcd-servers"), "http://127.0.0.1:2379");
  });

  it("raises the client limits of kube-controller-manager and kube-scheduler to 200 qps, burst 400", () => {
    for (const c of ["kube-controller-manager", "kube-scheduler"] as const) {
      const args = componentArgs(state(), c);
      assert.equal(flag(args, "--kube-api-qps"), "200", c);
      assert.equal(flag(args, "--kube-api-burst"), "400", c);
    }
  });

  it("passes feature gates, sorted, to the apiserver, controller-manager and scheduler only", () => {
    const s = state({ featureGates: "WatchList=false, ShardedListAndWatch=true" });
    for (const c of ["kube-apiserver", "kube-controller-manager", "kube-scheduler"] as const) {
      assert.equal(
        flag(componentArgs(s, c), "--feature-gates"),
        "ShardedListAndWatch=true,WatchList=false",
        c,
      );
    }
    for (const c of ["etcd", "kwok", "local-provisioner"] as const) {
      assert.equal(flag(componentArgs(s, c), "--feature-gates"), undefined, c);
    }
    assert.equal(
      flag(componentArgs(state(), "kube-apiserver"), "--feature-gates"),
      undefined,
      "no gates, no flag",
    );
  });

  it("builds every component's flags from the state alone, so a restart repeats them", () => {
    const s = state({ featureGates: { ShardedListAndWatch: true } });
    for (const c of COMPONENTS) {
      const again = JSON.parse(JSON.stringify(s)) as EnvState;
      assert.deepEqual(componentArgs(again, c), componentArgs(s, c), c);
    }
  });

  it("points kwok at the env's config file and its own ports", () => {
    const args = componentArgs(state(), "kwok");
    assert.equal(flag(args, "--config"), kwokConfigPath("/tmp/opkit-env-unit"));
    assert.equal(flag(args, "--server-address"), "127.0.0.1:10247");
  });

  it("runs the local provisioner with Node and the script beside this module", () => {
    const args = componentArgs(state(), "local-provisioner");
    assert.equal(componentExe("local-provisioner", "v1.34.4"), process.execPath);
    assert.equal(args[0], provisionerScript());
    assert.ok(existsSync(provisionerScript()), provisionerScript());
    assert.equal(flag(args, "--port"), "10248");
    assert.equal(flag(args, "--volumes-dir"), "/tmp/opkit-env-unit/volumes");
    assert.match(flag(args, "--kubeconfig") ?? "", /local-provisioner\.kubeconfig$/);
  });

  it("starts each Go component from its release's bin directory", () => {
    assert.match(componentExe("kube-apiserver", "v1.34.4"), /\/k8s-v1\.34\.4_[^/]+\/bin\/kube-apiserver$/);
    assert.match(componentExe("etcd", "v1.37.2"), /\/k8s-v1\.37\.2_[^/]+\/bin\/etcd$/);
  });

  it("leaves out the flags the env's release lacks, and nothing else", () => {
    const s = { ...state(), omittedFlags: { "kube-apiserver": ["endpoint-reconciler-type"] } };
    const args = componentArgs(s, "kube-apiserver");
    assert.equal(flag(args, "--endpoint-reconciler-type"), undefined);
    assert.deepEqual(
      args,
      componentArgs(state(), "kube-apiserver").filter((a) => !a.startsWith("--endpoint-reconciler-type=")),
    );
    assert.deepEqual(componentArgs(s, "kube-scheduler"), componentArgs(state(), "kube-scheduler"));
  });
});
