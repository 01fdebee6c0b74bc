/**
 * For leader-election tests: another identity writes the Lease, as a successor would after a network
 * partition, with a long duration so the old holder cannot take it back.
 */
import { Leases, type KubeClient } from "../../index.ts";

/** Make `holder` the holder of the Lease `namespace/name` now, valid for 60 s. */
export async function takeOverLease(
  client: KubeClient,
  namespace: string,
  name: string,
  holder = "successor",
): Promise<void> {
  const lease = await client.get(Leases, name, { namespace });
  // A MicroTime: RFC 3339 with microseconds.
  const now = new Date().toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
  await client.update({
    ...lease,
    spec: {
      ...lease.spec,
      holderIdentity: holder,
      renewTime: now,
      acquireTime: now,
      leaseDurationSeconds: 60,
    },
  });
}
