import { describe, it } from "node:test";
import assert from "node:assert/strict";
import {
  KUBERNETES_VERSION,
  KUBERNETES_VERSION_VARIABLE,
  SUPPORTED_KUBERNETES_VERSIONS,
  UnsupportedKubernetesVersionError,
  binDir,
  releaseKey,
  resolveKubernetesVersion,
} from "./versions.ts";

function withVariable<T>(value: string | undefined, fn: () => T): T {
  const before = process.env[KUBERNETES_VERSION_VARIABLE];
  if (value === undefined) delete process.env[KUBERNETES_VERSION_VARIABLE];
  else process.env[KUBERNETES_VERSION_VARIABLE] = value;
  try {
    return fn();
  } finally {
    if (before === undefined) delete process.env[KUBERNETES_VERSION_VARIABLE];
    else process.env[KUBERNETES_VERSION_VARIABLE] = before;
  }
}

describe("Kubernetes versions", () => {
  it("a minor picks its tested patch, a full version is taken as given", () => {
    withVariable(undefined, () => {
      assert.equal(resolveKubernetesVersion(), KUBERNETES_VERSION);
      assert.equal(resolveKubernetesVersion("1.34"), "v1.34.4");
      assert.equal(resolveKubernetesVersion("v1.35"), "v1.35.4");
      assert.equal(resolveKubernetesVersion(" 1.37 "), "v1.37.2");
      assert.equal(resolveKubernetesVersion("1.34.2"), "v1.34.2");
      assert.equal(resolveKubernetesVersion("v1.36.1"), "v1.36.1");
    });
  });

  it("supports 1.34 through 1.37, the default among them", () => {
    assert.deepEqual(
      SUPPORTED_KUBERNETES_VERSIONS.map((v) => v.split(".")[1]),
      ["34", "35", "36", "37"],
    );
    assert.ok(SUPPORTED_KUBERNETES_VERSIONS.includes(KUBERNETES_VERSION));
  });

  it("OPKIT_KUBERNETES_VERSION chooses when no option is given; the option wins", () => {
    withVariable("1.35", () => {
      assert.equal(resolveKubernetesVersion(), "v1.35.4");
      assert.equal(resolveKubernetesVersion("1.34"), "v1.34.4");
      assert.match(binDir(), /k8s-v1\.35\.4_/);
    });
  });

  it("refuses other versions, naming the flag or variable and the supported list", () => {
    withVariable(undefined, () => {
      for (const bad of ["1.33", "v1.38.0", "2.0", "latest", "1.34.x", "1"]) {
        assert.throws(
          () => resolveKubernetesVersion(bad),
          (err: unknown) =>
            err instanceof UnsupportedKubernetesVersionError &&
            err.option === "--kubernetes-version" &&
            /--kubernetes-version: .*supported: 1\.34, 1\.35, 1\.36, 1\.37/.test(err.message),
          bad,
        );
      }
    });
    withVariable("1.30", () =>
      assert.throws(
        () => resolveKubernetesVersion(),
        /OPKIT_KUBERNETES_VERSION: Kubernetes 1\.30 is not supported/,
      ),
    );
  });

  it("names each release's cache after it, etcd, kwok and the recipe", () => {
    assert.match(releaseKey("v1.34.4"), /^k8s-v1\.34\.4_etcd-v3\.6\.\d+_kwok-v0\.8\.0_r2$/);
    assert.notEqual(releaseKey("v1.34.4"), releaseKey("v1.37.2"));
  });
});
