import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";
import { createCertificateAuthority, loadCertificateAuthority, createSigningKey } from "./index.ts";

describe("pki", () => {
  it("issues a serving certificate the CA verifies, with DNS and IP names", async () => {
    const ca = await createCertificateAuthority("test-ca");
    const pair = await ca.issue({ commonName: "svc", usage: "server", hosts: ["svc.ns.svc", "127.0.0.1"] });
    const cert = new X509Certificate(pair.certPem);
    const caCert = new X509Certificate(ca.certPem);
    assert.ok(cert.checkIssued(caCert));
    assert.ok(cert.verify(caCert.publicKey));
    assert.ok(caCert.ca);
    assert.ok(!cert.ca);
    assert.equal(cert.checkHost("svc.ns.svc"), "svc.ns.svc");
    assert.equal(cert.checkIP("127.0.0.1"), "127.0.0.1");
    assert.equal(cert.checkHost("other"), undefined);
    assert.ok(cert.checkPrivateKey(createPrivateKey(pair.keyPem)));
  });

  it("puts organizations in the subject of client certificates (Kubernetes groups)", async () => {
    const ca = await createCertificateAuthority("test-ca");
    const pair = await ca.issue({ commonName: "admin", organizations: ["system:masters"], usage: "client" });
    assert.match(new X509Certificate(pair.certPem).subject, /CN=admin[\s\S]*O=system:masters/);
  });

  it("reloads a CA from PEM and keeps issuing under it", async () => {
    const ca = await createCertificateAuthority("test-ca");
    const again = await loadCertificateAuthority(ca.certPem, ca.keyPem);
    const pair = await again.issue({ commonName: "x", usage: "both" });
    assert.ok(new X509Certificate(pair.certPem).checkIssued(new X509Certificate(ca.certPem)));
  });

  it("creates a signing key pair whose halves match", async () => {
    const k = await createSigningKey();
    const pub = createPublicKey(createPrivateKey(k.privateKeyPem)).export({ type: "spki", format: "pem" });
    assert.equal(pub.toString().trim(), k.publicKeyPem.trim());
  });
});
