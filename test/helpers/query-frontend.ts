// A stand-in Temporal frontend on loopback that answers QueryWorkflow as `onQuery` decides (or
// never), and a client connected to it: for what a caller does when a query is slow, retried or
// never answered. Closed after the test.
import type { TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Client, Connection } from '@temporalio/client';

export type QueryHandler = (
  call: grpc.ServerUnaryCall<Buffer, Buffer>,
  reply: grpc.sendUnaryData<Buffer>,
) => void;

export async function queryFrontend(t: TestContext, onQuery: QueryHandler): Promise<Client> {
  const server = new grpc.Server();
  server.register(
    '/temporal.api.workflowservice.v1.WorkflowService/QueryWorkflow',
    onQuery,
    (b: Buffer) => b,
    (b: Buffer) => b,
    'unary',
  );
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) =>
      err ? reject(err) : resolve(p),
    ),
  );
  t.after(() => server.forceShutdown());
  const connection = Connection.lazy({ address: `127.0.0.1:${port}` });
  t.after(() => connection.close());
  return new Client({ connection });
}
