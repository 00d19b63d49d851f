// A real SMTP server on loopback (smtp-server) that keeps what it receives and can be told how
// to answer each message: accept, defer (451), reject (550), or store it and drop the
// connection before replying.
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

export type SmtpAnswer = 'accept' | 'defer' | 'reject' | 'store-then-drop';

export interface TestSmtp {
  port: number;
  messages: ParsedMail[];
  /** Answers for the next messages, in order; when empty, messages are accepted. */
  plan: SmtpAnswer[];
  /** Every DATA the server was offered, including rejected ones. */
  offered: number;
  auths: { username: string; password: string }[];
  /** Connection errors, e.g. a client process killed mid-session (ECONNRESET). */
  errors: Error[];
  close(): Promise<void>;
}

/** `host`: the address to listen on (the fault suite's hosts reach it on a bridge); loopback by default. */
export async function startSmtp(opts: { requireAuth?: boolean; host?: string } = {}): Promise<TestSmtp> {
  const state = {
    messages: [] as ParsedMail[],
    plan: [] as SmtpAnswer[],
    offered: 0,
    auths: [] as { username: string; password: string }[],
    errors: [] as Error[],
  };
  const server: SMTPServer = new SMTPServer({
    disabledCommands: opts.requireAuth ? ['STARTTLS'] : ['STARTTLS', 'AUTH'],
    authOptional: !opts.requireAuth,
    allowInsecureAuth: true,
    logger: false,
    onAuth(auth, _session, callback) {
      state.auths.push({ username: auth.username ?? '', password: auth.password ?? '' });
      callback(null, { user: auth.username });
    },
    onData(stream, session, callback) {
      state.offered++;
      const answer = state.plan.shift() ?? 'accept';
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        void (async () => {
          if (answer === 'defer')
            return callback(Object.assign(new Error('mailbox busy, try again later'), { responseCode: 451 }));
          if (answer === 'reject')
            return callback(Object.assign(new Error('no such mailbox'), { responseCode: 550 }));
          state.messages.push(await simpleParser(Buffer.concat(chunks)));
          if (answer === 'store-then-drop') {
            const connections = (
              server as unknown as { connections: Set<{ id: string; _socket: { destroy(): void } }> }
            ).connections;
            for (const c of connections) if (c.id === session.id) c._socket.destroy();
            return;
          }
          callback();
        })();
      });
    },
  });
  // A client that dies mid-session resets its connection; smtp-server reports it as an 'error'
  // event, which with no listener would crash the test process. A real server logs it and goes on.
  server.on('error', (err: Error) => state.errors.push(err));
  await new Promise<void>((resolve) => server.listen(0, opts.host ?? '127.0.0.1', resolve));
  const address = (server as unknown as { server: { address(): { port: number } } }).server.address();
  return Object.assign(state, {
    port: address.port,
    close: () => new Promise<void>((r) => server.close(() => r())),
  });
}
