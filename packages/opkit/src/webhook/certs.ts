/**
 * Serving certificates for the webhook server: reading the certificate and key files (and noticing
 * when they change on disk, so rotation needs no restart), and writing a self-signed CA plus a serving
 * certificate for local development, issued by pki/.
 *
 * The file names follow Kubernetes' TLS Secret keys (tls.crt, tls.key, ca.crt), so a Secret mounted as
 * a volume — by cert-manager or by opkit's generated manifests — is read as is.
 */
import { X509Certificate } from "node:crypto";
import { readFileSync, statSync } from "node:fs";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { isIP } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CertificateAuthority } from "../pki/index.ts";

/** controller-runtime's default certificate directory, so manifests written for Go operators fit. */
export const DEFAULT_CERT_DIR = join(tmpdir(), "k8s-webhook-server", "serving-certs");
/** The certificate file name in a certificate directory (as a kubernetes.io/tls Secret mounts it). */
export const CERT_FILE = "tls.crt";
/** The private key file name in a certificate directory. */
export const KEY_FILE = "tls.key";
/** The CA certificate file name in a certificate directory. */
export const CA_FILE = "ca.crt";

/** The certificate or key cannot be read; the message names the file and where it should come from. */
export class CertificateError extends Error {
  /** The file that could not be used. */
  readonly file: string;
  constructor(file: string, problem: string, options?: { cause?: unknown }) {
    super(
      `webhook serving certificate ${file}: ${problem}. Mount the certificate Secret there (tls.crt, tls.key) or set the certificate directory; for local development use opkit run --local-webhooks`,
      options,
    );
    this.name = "CertificateError";
    this.file = file;
  }
}

/** A certificate and its private key, as read from disk. */
export interface KeyPair {
  /** The certificate chain (PEM). */
  cert: Buffer;
  /** The private key (PEM). */
  key: Buffer;
}

function signature(file: string): string {
  try {
    const s = statSync(file);
    return `${s.ino}:${s.size}:${s.mtimeMs}`;
  } catch {
    return "missing";
  }
}

/**
 * A certificate and key on disk. `changed()` is a cheap stat of both files (inode, size and mtime), so
 * the server can ask on every new connection; it follows symlinks, so the atomic `..data` swap of a
 * Secret volume counts as a change.
 */
export class CertificateFiles {
  /** Path of the certificate (PEM). */
  readonly certFile: string;
  /** Path of the private key (PEM). */
  readonly keyFile: string;
  private seen = "";

  constructor(certFile: string, keyFile: string) {
    this.certFile = certFile;
    this.keyFile = keyFile;
  }

  /** Read both files; throws CertificateError naming the file that is missing or empty. */
  read(): KeyPair {
    const seen = `${signature(this.certFile)}|${signature(this.keyFile)}`;
    const pair = { cert: readOne(this.certFile), key: readOne(this.keyFile) };
    this.seen = seen;
    return pair;
  }

  /** True when either file differs from the last `read()`. */
  changed(): boolean {
    return `${signature(this.certFile)}|${signature(this.keyFile)}` !== this.seen;
  }
}

function readOne(file: string): Buffer {
  let data: Buffer;
  try {
    data = readFileSync(file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CertificateError(file, code === "ENOENT" ? "not found" : `cannot be read (${code})`, {
      cause: err,
    });
  }
  if (data.length === 0) throw new CertificateError(file, "is empty");
  return data;
}

/** Files written by `writeServingCertificate`. */
export interface ServingCertificate {
  /** The directory the files were written to. */
  dir: string;
  /** Path of tls.crt. */
  certFile: string;
  /** Path of tls.key. */
  keyFile: string;
  /** Path of ca.crt. */
  caFile: string;
  /** The CA certificate (PEM) that webhook configurations carry as caBundle. */
  caPem: string;
  /** The CA, to issue a new serving certificate on rotation. */
  ca: CertificateAuthority;
}

/** Options of `writeServingCertificate`: the names covered, the CA to issue from, the validity. */
export interface ServingCertificateOptions {
  /** DNS names and IP addresses the certificate is valid for (default 127.0.0.1, ::1 and localhost). */
  hosts?: string[];
  /** Issue from this CA instead of a new one (e.g. a rotation that keeps the caBundle). */
  ca?: CertificateAuthority;
  /** Validity of the serving certificate in days (default 365). */
  validDays?: number;
}

async function writeAtomic(file: string, content: string, mode: number): Promise<void> {
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, content, { mode });
  await rename(tmp, file);
}

/**
 * Write a CA (ca.crt) and a serving certificate (tls.crt, tls.key) into `dir` — a new self-signed CA
 * unless one is given. Each file is replaced atomically; the key is readable by the owner only.
 */
export async function writeServingCertificate(
  dir: string,
  options: ServingCertificateOptions = {},
): Promise<ServingCertificate> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  // pki/ pulls in @peculiar/x509 (~0.4 s of CPU to import): loaded only when a CA is written.
  const ca =
    options.ca ??
    (await (await import("../pki/index.ts")).createCertificateAuthority("opkit-webhook-ca", 3650));
  const hosts = options.hosts ?? ["127.0.0.1", "::1", "localhost"];
  const pair = await ca.issue({
    commonName: hosts[0] ?? "opkit-webhook",
    hosts,
    usage: "server",
    validDays: options.validDays ?? 365,
  });
  const out: ServingCertificate = {
    dir,
    certFile: join(dir, CERT_FILE),
    keyFile: join(dir, KEY_FILE),
    caFile: join(dir, CA_FILE),
    caPem: ca.certPem,
    ca,
  };
  await writeAtomic(out.caFile, ca.certPem, 0o644);
  await writeAtomic(out.keyFile, pair.keyPem, 0o600);
  await writeAtomic(out.certFile, pair.certPem, 0o644);
  return out;
}

/** A serving certificate's PEM material, as a TLS Secret holds it. */
export interface CertificatePem {
  /** The CA certificate (PEM), for the caBundle. */
  caPem: string;
  /** The serving certificate (PEM). */
  certPem: string;
  /** The serving certificate's private key (PEM). */
  keyPem: string;
}

/**
 * The serving certificate in `dir`, issued anew (with a new CA) only when it is missing, does not cover
 * every one of `hosts`, or expires within `minValidDays` (default 30). So generated manifests that embed
 * it stay byte-identical from one run to the next.
 */
export async function ensureServingCertificate(
  dir: string,
  options: { hosts: string[]; minValidDays?: number; validDays?: number },
): Promise<
  CertificatePem & {
    /** True when a new certificate was issued, false when the one on disk was still good. */
    issued: boolean;
  }
> {
  const read = async (f: string): Promise<string | undefined> =>
    readFile(join(dir, f), "utf8").catch(() => undefined);
  const [caPem, certPem, keyPem] = await Promise.all([read(CA_FILE), read(CERT_FILE), read(KEY_FILE)]);
  if (caPem && certPem && keyPem) {
    try {
      const cert = new X509Certificate(certPem);
      const margin = (options.minValidDays ?? 30) * 86_400_000;
      const covers = options.hosts.every(
        (h) => (isIP(h) ? cert.checkIP(h) : cert.checkHost(h)) !== undefined,
      );
      if (
        covers &&
        Date.parse(cert.validTo) - Date.now() > margin &&
        cert.checkIssued(new X509Certificate(caPem))
      )
        return { caPem, certPem, keyPem, issued: false };
    } catch {
      // Unreadable files are replaced below.
    }
  }
  const fresh = await writeServingCertificate(dir, { hosts: options.hosts, validDays: options.validDays });
  return {
    caPem: fresh.caPem,
    certPem: await readFile(fresh.certFile, "utf8"),
    keyPem: await readFile(fresh.keyFile, "utf8"),
    issued: true,
  };
}
