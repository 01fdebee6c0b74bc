/**
 * The Memcached operator's single description of itself: `opkit generate` derives its CRD, RBAC and
 * manifests from it, and src/main.ts runs it.
 */
import { defineOperator } from "opkit";
import { Memcached } from "./api/v1alpha1/memcached.ts";
import { memcachedController } from "./controllers/memcached.ts";

export default defineOperator({
  name: "memcached-operator",
  domain: "example.com",
  kinds: [Memcached],
  controllers: [() => memcachedController()],
});
