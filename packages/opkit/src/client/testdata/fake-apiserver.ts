/**
 * A scripted HTTP(S) server on 127.0.0.1 for the client's unit tests: each request is recorded and
 * answered by the test's handler, which can also drop the connection (a lost response) or never answer
 * (to be aborted). It is not an API server: tests that need real API semantics run against `opkit env`.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { Socket } from "node:net";
import type { TLSSocket } from "node:tls";

export interface Recorded {
  method: string;
  /** Path and query as sent. */
  url: string;
  headers: IncomingMessage["headers"];
  body: string;
  /** The client certificate's common name, on an HTTPS server that asks for one. */
  clientCN?: string;
}

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string | string[]>;
}

/** What a handler may do with a request besides answering it. */
export type Action = Reply | "drop" | "hang" | ((res: ServerResponse) => void);

export type Handler = (req: Recorded, index: number) => Action | Promise<Action>;

export interface FakeServer {
  url: string;
  port: number;
  requests: Recorded[];
  close(): Promise<void>;
}

export interface FakeServerOptions {
  tls?: { cert: string; key: string; ca?: string; requestCert?: boolean };
  /** Listen on this port (e.g. one a test reserved and released). */
  port?: number;
}

/** The discovery answer for /api/v1: ConfigMaps and Pods (with subresources), namespaced. */
export const CORE_V1_DISCOVERY: Reply = {
  status: 200,
  body: {
    kind: "APIResourceList",
    groupVersion: "v1",
    resources: [
      { name: "configmaps", kind: "ConfigMap", namespaced: true, verbs: ["create", "get", "list"] },
      { name: "pods", kind: "Pod", namespaced: true, verbs: ["create", "get", "list"] },
      { name: "pods/status", kind: "Pod", namespaced: true, verbs: ["get", "patch", "update"] },
      { name: "pods/eviction", kind: "Eviction", namespaced: true, verbs: ["create"] },
    ],
  },
};

/** A Status body as the API server sends with failures. */
export function status(code: number, reason: string, message = reason): Reply {
  return {
    status: code,
    body: { kind: "Status", apiVersion: "v1", status: "Failure", code, reason, message },
  };
}

export async function fakeApiServer(handler: Handler, options: FakeServerOptions = {}): Promise<FakeServer> {
  const requests: Recorded[] = [];
  const sockets = new Set<Socket>();
  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const socket = req.socket as TLSSocket;
      const peer = typeof socket.getPeerCertificate === "function" ? socket.getPeerCertificate() : undefined;
      const cn = peer?.subject?.CN;
      const rec: Recorded = {
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers,
        body: Buffer.concat(chunks).toString("utf8"),
        clientCN: Array.isArray(cn) ? cn[0] : cn,
      };
      const index = requests.length;
      requests.push(rec);
      void Promise.resolve(handler(rec, index)).then((action) => {
        if (action === "drop") return void req.socket.destroy();
        if (action === "hang") return;
        if (typeof action === "function") return action(res);
        res.writeHead(action.status, { "content-type": "application/json", ...action.headers });
        res.end(action.body === undefined ? "" : JSON.stringify(action.body));
      });
    });
  };
  const server = options.tls
    ? createHttpsServer(
        {
          cert: options.tls.cert,
          key: options.tls.key,
          ca: options.tls.ca,
          requestCert: options.tls.requestCert ?? false,
          rejectUnauthorized: false,
        },
        onRequest,
      )
    : createHttpServer(onRequest);
  server.on("connection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  server.on("secureConnection", (s: Socket) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const port = (server.address() as { port: number }).port;
  return {
    url: `${options.tls ? "https" : "http"}://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
