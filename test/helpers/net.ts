// Loopback ports: one that nothing listens on right now, and an HTTP server started on one.
import type { Server as HttpServer } from 'node:http';
import { createServer } from 'node:net';

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
