/** Serving certificates on disk: kept while valid for the hosts, reissued when not; bad files named. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import { mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  CertificateError,
  CertificateFiles,
  ensureServingCertificate,
  writeServingCertificate,
} from "./index.ts";

test("ensureServingCertificate keeps a valid certificate and reissues a missing, foreign or expiring one", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-certs-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const hosts = ["op-webhook.op-system.svc", "op-webhook.op-system.svc.cluster.local"];
  const first = await ensureServingCertificate(dir, { hosts });
  assert.equal(first.issued, true);
  const cert = new X509Certificate(first.certPem);
  assert.ok(cert.checkHost("op-webhook.op-system.svc"));
  assert.ok(cert.checkIssued(new X509Certificate(first.caPem)));
  assert.equal((await stat(join(dir, "tls.key"))).mode & 0o777, 0o600);

  const again = await ensureServingCertificate(dir, { hosts });
  assert.equal(again.issued, false);
  assert.equal(again.certPem, first.certPem, "unchanged, so generated manifests stay byte-identical");

  const otherHost = await ensureServingCertificate(dir, { hosts: ["other.ns.svc"] });
  assert.equal(otherHost.issued, true);
  const expiring = await ensureServingCertificate(dir, { hosts: ["other.ns.svc"], minValidDays: 400 });
  assert.equal(expiring.issued, true, "valid 365 days, asked for 400");
  await writeFile(join(dir, "tls.crt"), "garbage");
  assert.equal((await ensureServingCertificate(dir, { hosts: ["other.ns.svc"] })).issued, true);
});

test("CertificateFiles names the missing or empty file and notices changes", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "opkit-certs-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const files = new CertificateFiles(join(dir, "tls.crt"), join(dir, "tls.key"));
  assert.throws(
    () => files.read(),
    (err: unknown) => err instanceof CertificateError && /tls\.crt: not found/.test(err.message),
  );
  await writeServingCertificate(dir);
  files.read();
  assert.equal(files.changed(), false);
  await writeServingCertificate(dir);
  assert.equal(files.changed(), true);
  await writeFile(join(dir, "tls.key"), "");
  assert.throws(() => files.read(), /tls\.key: is empty/);
});
