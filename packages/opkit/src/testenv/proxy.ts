/**
 * A TCP proxy on 127.0.0.1 for network fault injection: point a client at it, then drop every open
 * connection (a network blip mid-watch) or refuse new ones for a while (a partition). TLS passes through
 * untouched; the apiserver's certificate is valid for 127.0.0.1 on any port.
 */
import { createConnection, createServer, type Server, type Socket } from "node:net";
import { Transform, type TransformCallback } from "node:stream";
import { loadClusterConfig, type ClusterConfig } from "../client/config.ts";

/**
 * A TCP proxy in front of the API server for fault injection: drop, freeze or refuse connections of the
 * clients that go through it, and heal again.
 */
export interface TcpProxy {
  /** The local port clients connect to. */
  readonly port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /**
   * Frozen connections the client has not closed yet: 0 again once it noticed every one (how fault tests time
   * a client's liveness checks).
   */
  readonly frozen: number;
  /** Reset every open connection now. */
  dropAll(): void;
  /**
   * Stop forwarding on every open connection without closing it: both ends keep a live TCP socket
   * that never carries another byte, as behind a dead NAT entry or a hung load balancer. New
   * connections work normally.
   */
  freezeAll(): void;
  /** Refuse (reset) new connections until `heal()`. */
  partition(): void;
  /**
   * Forward what the server sends on connections opened from now on at most `bytesPerSecond` (a slow
   * link), or at full speed again with `undefined`. A test that cuts a response midway needs it when the
   * response is small enough to sit whole in the socket buffers between server and client.
   */
  throttle(bytesPerSecond: number | undefined): void;
  /**
   * A silent server: freeze every open connection, and accept new ones but never forward a byte on
   * them, until `heal()` (a hung API server or a black-holed route, where nothing fails fast).
   */
  blackhole(): void;
  /** End a partition or black hole: new connections are forwarded again. */
  heal(): void;
  /** Close the proxy and every connection. */
  close(): Promise<void>;
}

/**
 * Start a TCP proxy on a free local port that forwards to `targetHost:targetPort`; pair it with
 * `kubeConfigVia` to point a client at it.
 */
export async function startTcpProxy(targetPort: number, targetHost = "127.0.0.1"): Promise<TcpProxy> {
  // Long on purpose: the proxy's fault controls share the live connections held in this closure.
  const open = new Set<Socket>();
  // Client, upstream and, on a throttled connection, the stream that slows the upstream's bytes.
  type Pair = [Socket, Socket, Transform | undefined];
  const pairs = new Set<Pair>();
  const frozen = new Set<Socket>();
  let partitioned = false;
  let silent = false;
  let rate: number | undefined;
  let accepted = 0;
  const server: Server = createServer((client) => {
    accepted++;
    if (partitioned) {
      client.resetAndDestroy();
      return;
    }
    if (silent) {
      open.add(client);
      client
        .on("data", () => undefined)
        .on("error", () => open.delete(client))
        .on("close", () => open.delete(client));
      return;
    }
    const upstream = createConnection({ port: targetPort, host: targetHost });
    open.add(client);
    open.add(upstream);
    const slow = rate !== undefined ? throttled(rate) : undefined;
    const pair: Pair = [client, upstream, slow];
    pairs.add(pair);
    const cleanup = (): void => {
      frozen.delete(client);
      open.delete(client);
      open.delete(upstream);
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
      slow?.destroy();
    };
    client.on("error", cleanup).on("close", cleanup);
    // A throttled connection may still hold what the server sent before it closed: the pipe ends the
    // client once that passed, and the client's close cleans up.
    upstream.on("error", cleanup).on("close", () => (slow ? undefined : cleanup()));
    client.pipe(upstream);
    if (slow) upstream.pipe(slow).pipe(client);
    else upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  const freezeAll = (): void => {
    for (const [c, u, slow] of pairs) {
      frozen.add(c);
      c.unpipe(u);
      u.unpipe(slow ?? c);
      slow?.unpipe(c);
      // Keep reading (and discarding) so the peers' writes never block and a peer's close is seen: only
      // forwarding stops. unpipe() paused the sockets, and a new 'data' listener does not resume a paused one.
      c.removeAllListeners("data")
        .on("data", () => undefined)
        .resume();
      u.removeAllListeners("data")
        .on("data", () => undefined)
        .resume();
      // A throttled pair leaves the upstream's close to the pipe, which is cut now: pass it on here.
      if (slow) u.once("close", () => c.destroy());
    }
    pairs.clear();
  };
  const dropAll = (): void => {
    for (const s of open) s.resetAndDestroy();
    open.clear();
    frozen.clear();
  };
  return {
    port,
    get connections() {
      return accepted;
    },
    get frozen() {
      return frozen.size;
    },
    dropAll,
    freezeAll,
    partition: () => {
      partitioned = true;
      dropAll();
    },
    blackhole: () => {
      silent = true;
      freezeAll();
    },
    throttle: (bytesPerSecond) => {
      if (bytesPerSecond !== undefined && !(bytesPerSecond > 0))
        throw new RangeError(`throttle: bytesPerSecond must be > 0 (got ${bytesPerSecond})`);
      rate = bytesPerSecond;
    },
    heal: () => {
      partitioned = false;
      silent = false;
    },
    close: async () => {
      dropAll();
      await new Promise((r) => server.close(r));
    },
  };
}

/** A stream that passes its bytes on at most `bytesPerSecond`, in slices of a tenth of a second's worth. */
function throttled(bytesPerSecond: number): Transform {
  const slice = Math.max(1, Math.floor(bytesPerSecond / 10));
  return new Transform({
    transform(chunk: Buffer, _enc, done: TransformCallback) {
      let at = 0;
      const next = (): void => {
        if (this.destroyed) return done();
        const part = chunk.subarray(at, at + slice);
        at += part.length;
        this.push(part);
        // Wait out each slice's time, the last one's too: small chunks must not pass at full speed.
        setTimeout(at >= chunk.length ? done : next, (part.length / bytesPerSecond) * 1000);
      };
      next();
    },
  });
}

/** The configuration of the kubeconfig at `path`, but with its cluster reached through `port` on 127.0.0.1. */
export async function kubeConfigVia(path: string, port: number): Promise<ClusterConfig> {
  const config = await loadClusterConfig({ kubeconfig: path });
  return { ...config, server: `https://127.0.0.1:${port}` };
}
