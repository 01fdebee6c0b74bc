/**
 * pki — a small certificate authority for local use: the control plane's serving and client
 * certificates (testenv) and webhook serving certificates (webhook). ECDSA P-256 keys, PEM output.
 *
 * It knows nothing about Kubernetes beyond the subject names callers pass in.
 */
export {
  type CertificateAuthority,
  type CertificateRequest,
  createCertificateAuthority,
  createSigningKey,
  type KeyPairPem,
  loadCertificateAuthority,
} from "./ca.ts";
