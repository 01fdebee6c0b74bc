/**
 * The env's certificates and kubeconfigs: a CA of the env's own, kube-apiserver's serving certificate,
 * the service-account signing key, and one client certificate (in a kubeconfig) per user of the
 * apiserver: the admin, each control-plane component and the local provisioner. It knows nothing of
 * how the components are started.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createCertificateAuthority, createSigningKey } from "../pki/index.ts";

/** The users that get a client certificate: file name → subject. */
export const ENV_USERS = {
  admin: { cn: "admin", orgs: ["system:masters"] },
  "kube-controller-manager": { cn: "system:kube-controller-manager", orgs: [] },
  "kube-scheduler": { cn: "system:kube-scheduler", orgs: [] },
  kwok: { cn: "opkit:kwok", orgs: ["system:masters"] },
  // Not a member of system:masters: it acts only through the ClusterRole storage.ts grants it.
  "local-provisioner": { cn: "opkit:local-provisioner", orgs: [] },
} as const satisfies Record<string, { cn: string; orgs: string[] }>;
/** One of ENV_USERS. */
export type EnvUser = keyof typeof ENV_USERS;

/** Where an env's PKI files live, relative to its directory. */
export function pkiFile(dir: string, file: string): string {
  return join(dir, "pki", file);
}

/** The kubeconfig of `user` in env directory `dir` (the admin's is `<dir>/kubeconfig`). */
export function kubeconfigFile(dir: string, user: EnvUser): string {
  return user === "admin" ? join(dir, "kubeconfig") : join(dir, `${user}.kubeconfig`);
}

/**
 * Write the CA, the apiserver's serving pair, the service-account keys and a kubeconfig per user into
 * `dir`. Private keys are written 0600.
 */
export async function writeEnvCertificates(opts: {
  name: string;
  dir: string;
  server: string;
  advertiseAddress: string;
  /** The first address of the Service range: the `kubernetes` Service's ClusterIP. */
  kubernetesServiceIP: string;
}): Promise<void> {
  const ca = await createCertificateAuthority(`opkit-env-${opts.name}-ca`);
  const serving = await ca.issue({
    commonName: "kube-apiserver",
    usage: "server",
    hosts: [
      "127.0.0.1",
      opts.advertiseAddress,
      opts.kubernetesServiceIP,
      "localhost",
      "kubernetes",
      "kubernetes.default",
      "kubernetes.default.svc",
      "kubernetes.default.svc.cluster.local",
    ],
  });
  const sa = await createSigningKey();
  const files: Record<string, string> = {
    "ca.crt": ca.certPem,
    "ca.key": ca.keyPem,
    "apiserver.crt": serving.certPem,
    "apiserver.key": serving.keyPem,
    "sa.key": sa.privateKeyPem,
    "sa.pub": sa.publicKeyPem,
  };
  for (const [user, u] of Object.entries(ENV_USERS) as [EnvUser, { cn: string; orgs: string[] }][]) {
    const pair = await ca.issue({ commonName: u.cn, organizations: u.orgs, usage: "client" });
    const kubeconfig = kubeconfigYaml(
      `opkit-${opts.name}`,
      opts.server,
      ca.certPem,
      u.cn,
      pair.certPem,
      pair.keyPem,
    );
    await writeFile(kubeconfigFile(opts.dir, user), kubeconfig, { mode: 0o600 });
  }
  for (const [f, content] of Object.entries(files)) {
    await writeFile(pkiFile(opts.dir, f), content, { mode: f.endsWith(".key") ? 0o600 : 0o644 });
  }
}

/** The first usable address of an IPv4 CIDR (the apiserver gives it to the `kubernetes` Service). */
export function firstAddress(cidr: string): string {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(cidr);
  const octets = m?.slice(1, 5).map(Number) ?? [];
  const bits = Number(m?.[5]);
  if (!m || octets.some((o) => o > 255) || bits < 1 || bits > 30) {
    throw new Error(`"${cidr}" is not an IPv4 CIDR with a prefix from /1 to /30`);
  }
  const base = octets.reduce((acc, o) => acc * 256 + o, 0);
  const size = 2 ** (32 - bits);
  const first = base - (base % size) + 1;
  return [24, 16, 8, 0].map((shift) => Math.floor(first / 2 ** shift) % 256).join(".");
}

function kubeconfigYaml(
  name: string,
  server: string,
  caPem: string,
  user: string,
  certPem: string,
  keyPem: string,
): string {
  const b64 = (s: string): string => Buffer.from(s).toString("base64");
  return `apiVersion: v1
kind: Config
clusters:
- name: ${name}
  cluster:
    server: ${server}
    certificate-authority-data: ${b64(caPem)}
users:
- name: ${user}
  user:
    client-certificate-data: ${b64(certPem)}
    client-key-data: ${b64(keyPem)}
contexts:
- name: ${name}
  context:
    cluster: ${name}
    user: ${user}
current-context: ${name}
`;
}
