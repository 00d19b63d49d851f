// libpq's two attempts of sslmode=allow and prefer under ONE node-postgres client, through pg's
// public `stream` option (a factory of the Duplex pg connects with): pg is told ssl=false and this
// stream does the rest, speaking the PostgreSQL protocol's own start (SSLRequest, its one-byte
// answer, the first message after the startup) and nothing of pg's code:
//
//   prefer  TCP, SSLRequest. "S": TLS on that connection. "N": the plain startup goes on that same
//           connection (one connection, one backend, as libpq). A TLS handshake that fails (say
//           the certificate check) is followed by a plain attempt on a new connection.
//   allow   plain first; TLS on a new connection if the plain one is refused.
//
// An attempt is refused when the server answers the startup message with an ErrorResponse
// (pg_hba.conf's "no encryption", a client certificate missing, ...) or closes the connection
// first. The next attempt gets the same startup message: pg never sees the refusal, its queued
// queries, type parsers and listeners stay where they are. A server that accepted the startup
// (asked for a password, said AuthenticationOk) has the session: a wrong password or a missing
// database is pg's to report, as on a connection without fallback. libpq would retry those too;
// the second attempt could not say anything else on a server whose TLS and plain rules agree.
import { connect as tcpConnect, isIP, type Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { connect as tlsConnect, type ConnectionOptions } from 'node:tls';

/** One of libpq's attempts: TLS with these options, or false for plain. */
export type Attempt = ConnectionOptions | false;

/** Int32 length 8, Int32 80877103: the SSLRequest message. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const ERROR_RESPONSE = 0x45; // 'E'

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/** How an attempt ended that did not become the session. */
interface Refusal {
  tls: boolean;
  /** A failure of the connection itself (TCP, the TLS handshake, an early close). */
  error?: Error;
  /** The server's ErrorResponse to the startup message, as received. */
  reply?: Buffer;
  code?: string;
  message: string;
}

/** A connected attempt: the socket pg will talk through and the TCP socket under it. */
interface Link {
  socket: Socket;
  tcp: Socket;
  tls: boolean;
  /** prefer's TLS request was answered "N": this plain link IS the plain attempt (libpq makes no other). */
  spentNext: boolean;
}

/** A network failure ends the attempts: the next one would reach no other server. */
function fallbackAllowed(r: Refusal): boolean {
  return !(r.code && NETWORK_CODES.has(r.code));
}

/** Which of two refusals explains the failure (the second unless it says nothing new). */
function decisive(first: Refusal, second: Refusal): Refusal {
  // allow's TLS attempt on a server without TLS: the plain attempt's answer (a missing database,
  // say, which ensureDatabase acts on) is the one that counts.
  if (/does not support SSL/i.test(second.message)) return first;
  // prefer on a server that takes TLS only: the plain retry's "no encryption" says nothing new; the
  // TLS attempt's answer (a certificate that failed verification, ...) is the one to act on.
  if (first.tls && second.code === '28000' && /no encryption/i.test(second.message)) return first;
  return second;
}

/** The code and message fields of an ErrorResponse (Byte1 'E', Int32 length, fields). */
function errorFields(reply: Buffer): { code?: string; message: string } {
  const fields: Record<string, string> = {};
  let at = 5;
  while (at < reply.length && reply[at] !== 0) {
    const end = reply.indexOf(0, at + 1);
    if (end < 0) break;
    fields[String.fromCharCode(reply[at]!)] = reply.toString('utf8', at + 1, end);
    at = end + 1;
  }
  return { code: fields.C, message: fields.M ?? 'the server refused the connection' };
}

/** Resolves when the socket emits `done`; rejects on its error or close before that. */
function until(socket: Socket, done: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const settle = (err?: Error) => {
      socket.off(done, onDone).off('error', settle).off('close', onClose);
      if (err) reject(err);
      else resolve();
    };
    const onDone = () => settle();
    const onClose = () => settle(new Error('Connection terminated unexpectedly'));
    socket.once(done, onDone).once('error', settle).once('close', onClose);
  });
}

/** The first bytes the socket receives. */
function firstData(socket: Socket): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const onData = (b: Buffer) => settle(undefined, b);
    const onClose = () => settle(new Error('Connection terminated unexpectedly'));
    const settle = (err?: Error, b?: Buffer) => {
      socket.off('data', onData).off('error', settle).off('close', onClose);
      if (err) reject(err);
      else resolve(b!);
    };
    socket.on('data', onData).once('error', settle).once('close', onClose);
  });
}

/**
 * The Duplex a TidemarkPgClient's pg connection talks through when its sslmode has two attempts.
 * It carries pg's bytes to the connection of the attempt that got through.
 */
export class FallbackStream extends Duplex {
  readonly #plan: readonly Attempt[];
  #socket: Socket | undefined;
  #tcp: Socket | undefined;
  #tls = false;
  /** pg's bytes before the server accepted its startup: sent again on the next attempt. */
  readonly #sent: Buffer[] = [];
  /** Past the startup: pg's bytes and the server's flow through unread. */
  #open = false;
  #announced = false;
  #eof = false;
  #noDelay = true;
  #keepAlive: [boolean, number] = [false, 0];
  #unref = false;

  constructor(plan: readonly Attempt[]) {
    super({ allowHalfOpen: false });
    this.#plan = plan;
  }

  /** Whether the connection pg talks through, or whose refusal pg was told, uses TLS. */
  get tls(): boolean {
    return this.#tls;
  }

  /** What pg calls to open its connection (as on a net.Socket); 'connect' when it may send its startup. */
  connect(port: number, host: string): this {
    this.#run(port, host).catch((err: Error) => this.destroy(err));
    return this;
  }

  setNoDelay(noDelay = true): this {
    this.#noDelay = noDelay;
    this.#tcp?.setNoDelay(noDelay);
    return this;
  }

  setKeepAlive(enable = false, initialDelay = 0): this {
    this.#keepAlive = [enable, initialDelay];
    this.#tcp?.setKeepAlive(enable, initialDelay);
    return this;
  }

  ref(): this {
    this.#unref = false;
    this.#tcp?.ref();
    return this;
  }

  unref(): this {
    this.#unref = true;
    this.#tcp?.unref();
    return this;
  }

  async #run(port: number, host: string): Promise<void> {
    let first: Refusal | undefined;
    for (let i = 0; i < this.#plan.length; i++) {
      const { refusal, spentNext } = await this.#attempt(port, host, i);
      if (!refusal || this.destroyed) return;
      const last = i === this.#plan.length - 1 || spentNext || !fallbackAllowed(refusal);
      if (last) return this.#refuse(first ? decisive(first, refusal) : refusal);
      first = refusal;
    }
  }

  /** Attempt i: its refusal, or none when the server accepted the startup (or pg gave up). */
  async #attempt(port: number, host: string, i: number): Promise<{ refusal?: Refusal; spentNext: boolean }> {
    const attempt = this.#plan[i]!;
    let link: Link;
    try {
      link = await this.#link(port, host, attempt, this.#plan[i + 1] === false);
    } catch (err) {
      const e = err as Error & { code?: string };
      return {
        refusal: { tls: attempt !== false, error: e, code: e.code, message: e.message },
        spentNext: false,
      };
    }
    if (this.destroyed) {
      link.socket.destroy();
      return { spentNext: true };
    }
    return { refusal: await this.#startup(link), spentNext: link.spentNext };
  }

  /** A TCP connection, with TLS for a TLS attempt. */
  async #link(port: number, host: string, attempt: Attempt, plainNext: boolean): Promise<Link> {
    const tcp = tcpConnect({ port, host, noDelay: this.#noDelay });
    // Errors reach the listeners of each step; this one outlives them (a late reset of a discarded attempt).
    tcp.on('error', () => undefined);
    this.#tcp = tcp;
    tcp.setKeepAlive(...this.#keepAlive);
    if (this.#unref) tcp.unref();
    const fail = (err: unknown): never => {
      tcp.destroy();
      throw err;
    };
    await until(tcp, 'connect').catch(fail);
    if (attempt === false) return { socket: tcp, tcp, tls: false, spentNext: false };
    tcp.write(SSL_REQUEST);
    const answer = await firstData(tcp).catch(fail);
    if (answer.length === 1 && answer[0] === 0x4e /* 'N' */) {
      if (plainNext) return { socket: tcp, tcp, tls: false, spentNext: true };
      fail(new Error('The server does not support SSL connections'));
    }
    if (answer.length !== 1 || answer[0] !== 0x53 /* 'S' */)
      fail(new Error('There was an error establishing an SSL connection'));
    // As pg: the host for the identity check; SNI for a name only (RFC 6066).
    const socket = tlsConnect({ ...attempt, socket: tcp, host, ...(isIP(host) ? {} : { servername: host }) });
    socket.on('error', () => undefined);
    await until(socket, 'secureConnect').catch((err: unknown) => {
      socket.destroy();
      fail(err);
    });
    return { socket, tcp, tls: true, spentNext: false };
  }

  /**
   * pg's startup message on the link (pg sends it on 'connect'; a later attempt gets what it
   * sent); resolves with the refusal, or undefined once the server accepted it and the link is
   * pg's connection.
   */
  #startup(link: Link): Promise<Refusal | undefined> {
    const { socket } = link;
    this.#socket = socket;
    this.#tls = link.tls;
    return new Promise((resolve) => {
      let got = Buffer.alloc(0);
      const settle = (refusal?: Refusal) => {
        socket.off('data', onData).off('error', onError).off('close', onClose);
        if (!refusal) return resolve(undefined);
        socket.destroy();
        link.tcp.destroy();
        resolve(refusal);
      };
      const onData = (chunk: Buffer) => {
        got = Buffer.concat([got, chunk]);
        if (got[0] !== ERROR_RESPONSE) {
          settle();
          this.#pipe(socket, got);
        } else if (got.length >= 5 && got.length >= 1 + got.readUInt32BE(1)) {
          settle({ tls: link.tls, reply: got, ...errorFields(got) });
        }
      };
      const onError = (e: Error & { code?: string }) =>
        settle({ tls: link.tls, error: e, code: e.code, message: e.message });
      const onClose = () => onError(new Error('Connection terminated unexpectedly'));
      socket.on('data', onData).once('error', onError).once('close', onClose);
      if (!this.#announced) {
        this.#announced = true;
        this.emit('connect');
      } else {
        for (const b of this.#sent) socket.write(b);
      }
    });
  }

  /** From here on the link is pg's connection. */
  #pipe(socket: Socket, first: Buffer): void {
    this.#open = true;
    this.#sent.length = 0;
    socket.on('data', (b: Buffer) => {
      if (!this.push(b)) socket.pause();
    });
    socket.on('end', () => this.#end());
    socket.on('error', (err) => this.destroy(err));
    // As a net.Socket: closed once the server's last bytes are read.
    socket.on('close', () => {
      if (this.destroyed) return;
      this.#end();
      if (this.readableLength === 0) this.destroy();
      else this.once('end', () => this.destroy());
    });
    if (!this.push(first)) socket.pause();
  }

  /** pg is told why the attempts failed: the server's own ErrorResponse, else the connection's error. */
  #refuse(refusal: Refusal): void {
    if (this.destroyed) return;
    this.#tls = refusal.tls;
    if (!refusal.reply) {
      this.destroy(refusal.error);
      return;
    }
    this.push(refusal.reply);
    this.#end();
  }

  #end(): void {
    if (this.#eof || this.destroyed) return;
    this.#eof = true;
    this.push(null);
  }

  override _read(): void {
    if (this.#open) this.#socket?.resume();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (err?: Error | null) => void): void {
    const socket = this.#socket;
    if (this.#open && socket) {
      // The connection is gone: pg hears it from 'close', as from a net.Socket.
      if (socket.destroyed) callback();
      else socket.write(chunk, callback);
      return;
    }
    this.#sent.push(chunk);
    if (socket && !socket.destroyed) socket.write(chunk);
    callback();
  }

  override _final(callback: (err?: Error | null) => void): void {
    const socket = this.#socket;
    if (!this.#open) {
      // pg ended the connection before an attempt got through: no further attempt.
      callback();
      this.destroy();
    } else if (socket && !socket.destroyed) socket.end(() => callback());
    else callback();
  }

  override _destroy(err: Error | null, callback: (err?: Error | null) => void): void {
    this.#socket?.destroy();
    this.#tcp?.destroy();
    callback(err);
  }
}
