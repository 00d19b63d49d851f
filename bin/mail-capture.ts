// The dev stack's mail capture: a local SMTP server that keeps every message as an .eml file
// a person can open, so alerts and reports can be read without a real mail server.
import { createWriteStream, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { SMTPServer } from 'smtp-server';

export interface MailCapture {
  port: number;
  dir: string;
  close(): Promise<void>;
}

export async function startMailCapture(dir: string, preferredPort = 2525): Promise<MailCapture> {
  mkdirSync(dir, { recursive: true });
  let n = 0;
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    allowInsecureAuth: true,
    logger: false,
    onAuth: (_auth, _session, callback) => callback(null, { user: 'dev' }),
    onData(stream, session, callback) {
      const file = join(dir, `${new Date().toISOString().replace(/[:.]/g, '-')}-${session.id}-${++n}.eml`);
      stream
        .pipe(createWriteStream(file))
        .on('finish', () => callback())
        .on('error', (err) => callback(err));
    },
  });
  const listen = (port: number) =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
  await listen(preferredPort).catch(() => listen(0));
  const { port } = (server as unknown as { server: { address(): { port: number } } }).server.address();
  return { port, dir, close: () => new Promise<void>((r) => server.close(() => r())) };
}
