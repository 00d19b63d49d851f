// A TCP forwarder: the hosts reach a server that listens on loopback only (the Temporal dev
// server's internal services dial each other on 127.0.0.1, so it cannot listen on the bridge)
// through the same port on the bridge address. A connection the server refuses or drops is
// closed on the host's side too, as the server's own would be.
import { createServer, connect, type Socket } from 'node:net';

export async function forward(
  listenHost: string,
  port: number,
  upstreamHost = '127.0.0.1',
): Promise<{ close(): Promise<void> }> {
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = connect(port, upstreamHost);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
      s.on('error', () => {
        client.destroy();
        upstream.destroy();
      });
    }
    client.pipe(upstream).pipe(client);
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, listenHost, resolve);
  });
  return {
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
