// Loopback helpers: a port that nothing listens on right now, an HTTP server started on one, a TCP
// proxy that counts the connections it accepts, a PostgreSQL server that answers "no TLS".
import type { Server as HttpServer } from 'node:http';
import { createConnection, createServer, type AddressInfo, type Socket } from 'node:net';

/** A loopback port that nothing listens on right now. */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * Starts an HTTP server on a free loopback port: its base URL, and a close that also ends
 * kept-alive connections (a plain close would wait for them).
 */
export async function listenOnLoopback(server: HttpServer): Promise<{ url: string; close(): Promise<void> }> {
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

export interface CountingProxy {
  port: number;
  /** Connections accepted so far. */
  accepted: () => number;
  close: () => Promise<void>;
}

/** A TCP proxy on loopback in front of host:port that counts the connections it accepts. */
export async function countingProxy(host: string, port: number): Promise<CountingProxy> {
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createServer((inbound) => {
    accepted++;
    const outbound = createConnection({ host, port });
    for (const s of [inbound, outbound]) {
      sockets.add(s);
      s.on('error', () => undefined);
      s.on('close', () => sockets.delete(s));
    }
    inbound.pipe(outbound).pipe(inbound);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    accepted: () => accepted,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}

/** A loopback server that answers every TLS request with "N" and records what the client sends next. */
export async function noTlsServer(): Promise<{
  port: number;
  connections: () => number;
  startups: () => number;
  close: () => Promise<void>;
}> {
  let connections = 0;
  let startups = 0;
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    connections++;
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
    let first = true;
    s.on('data', (b: Buffer) => {
      if (first && b.length >= 8 && b.readUInt32BE(4) === 80877103) {
        first = false;
        s.write('N');
        return;
      }
      // A startup message after "no TLS": the client went on in plain. Refuse it like a server would.
      startups++;
      s.destroy();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    port: (server.address() as AddressInfo).port,
    connections: () => connections,
    startups: () => startups,
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
