/**
 * The certificate authority: create or load one, issue certificates, make signing keys.
 */
// @peculiar/x509 resolves its algorithms through tsyringe, which needs the Reflect metadata polyfill first.
import "reflect-metadata";
import * as x509 from "@peculiar/x509";
import { webcrypto } from "node:crypto";
import { isIP } from "node:net";

type CryptoKey = webcrypto.CryptoKey;
type CryptoKeyPair = webcrypto.CryptoKeyPair;

// @peculiar/x509 signs with WebCrypto; Node's implementation is the provider.
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const ALG: webcrypto.EcKeyGenParams & webcrypto.EcdsaParams = {
  name: "ECDSA",
  namedCurve: "P-256",
  hash: "SHA-256",
};

export interface KeyPairPem {
  certPem: string;
  keyPem: string;
}

export interface CertificateAuthority extends KeyPairPem {
  /** Issue a certificate signed by this CA. */
  issue(req: CertificateRequest): Promise<KeyPairPem>;
}

export interface CertificateRequest {
  commonName: string;
  organizations?: string[];
  /** DNS names and IP addresses (both accepted; IPs are detected). */
  hosts?: string[];
  usage: "server" | "client" | "both";
  validDays?: number;
}

async function newKeys(): Promise<CryptoKeyPair> {
  return await webcrypto.subtle.generateKey(ALG, true, ["sign", "verify"]);
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = await webcrypto.subtle.exportKey("pkcs8", key);
  return x509.PemConverter.encode(der, "PRIVATE KEY");
}

function subject(cn: string, orgs: string[] = []): string {
  const esc = (s: string): string => s.replace(/([,+"\\<>;=])/g, "\\$1");
  return [`CN=${esc(cn)}`, ...orgs.map((o) => `O=${esc(o)}`)].join(", ");
}

function validity(days: number): { notBefore: Date; notAfter: Date } {
  // Back-date a little so that clocks that differ by seconds do not reject a fresh certificate.
  const notBefore = new Date(Date.now() - 5 * 60_000);
  return { notBefore, notAfter: new Date(notBefore.getTime() + days * 86_400_000) };
}

/** Create a new self-signed CA (valid 10 years by default). */
export async function createCertificateAuthority(
  commonName: string,
  validDays = 3650,
): Promise<CertificateAuthority> {
  const keys = await newKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: subject(commonName),
    keys,
    signingAlgorithm: ALG,
    ...validity(validDays),
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return authority(cert, keys.privateKey, await privateKeyPem(keys.privateKey));
}

/** Load a CA written earlier by `createCertificateAuthority`. */
export async function loadCertificateAuthority(
  certPem: string,
  keyPem: string,
): Promise<CertificateAuthority> {
  const cert = new x509.X509Certificate(certPem);
  const der = x509.PemConverter.decodeFirst(keyPem);
  const key = await webcrypto.subtle.importKey("pkcs8", der, ALG, true, ["sign"]);
  return authority(cert, key, keyPem);
}

function authority(caCert: x509.X509Certificate, caKey: CryptoKey, caKeyPem: string): CertificateAuthority {
  return {
    certPem: caCert.toString("pem"),
    keyPem: caKeyPem,
    async issue(req: CertificateRequest): Promise<KeyPairPem> {
      const keys = await newKeys();
      const hosts = req.hosts ?? [];
      const usages: string[] = [];
      if (req.usage !== "client") usages.push(x509.ExtendedKeyUsage.serverAuth);
      if (req.usage !== "server") usages.push(x509.ExtendedKeyUsage.clientAuth);
      const extensions: x509.Extension[] = [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(
          x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
          true,
        ),
        new x509.ExtendedKeyUsageExtension(usages),
        await x509.AuthorityKeyIdentifierExtension.create(caCert),
      ];
      if (hosts.length > 0) {
        extensions.push(
          new x509.SubjectAlternativeNameExtension(
            hosts.map((h) =>
              isIP(h) ? { type: "ip" as const, value: h } : { type: "dns" as const, value: h },
            ),
          ),
        );
      }
      const cert = await x509.X509CertificateGenerator.create({
        subject: subject(req.commonName, req.organizations),
        issuer: caCert.subject,
        publicKey: keys.publicKey,
        signingKey: caKey,
        signingAlgorithm: ALG,
        ...validity(req.validDays ?? 365),
        extensions,
      });
      return { certPem: cert.toString("pem"), keyPem: await privateKeyPem(keys.privateKey) };
    },
  };
}

/** A bare key pair (e.g. the service-account token signing key): PKCS#8 private key and SPKI public key. */
export async function createSigningKey(): Promise<{ privateKeyPem: string; publicKeyPem: string }> {
  const keys = await newKeys();
  const spki = await webcrypto.subtle.exportKey("spki", keys.publicKey);
  return {
    privateKeyPem: await privateKeyPem(keys.privateKey),
    publicKeyPem: x509.PemConverter.encode(spki, "PUBLIC KEY"),
  };
}
