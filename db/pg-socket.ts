// libpq's two attempts of sslmode=allow and prefer under ONE node-postgres client, through pg's
// documented `stream` option: pg is told ssl=false and connects through this socket, which makes
// the attempts with the PostgreSQL protocol's own start and nothing of pg's code:
//
//   prefer  TCP, SSLRequest. "S": TLS on that connection. "N": pg's plain startup goes on that
//           same connection (one connection, one backend, as libpq). A TLS handshake that fails
//           (a certificate check, say) is followed by a plain attempt on a new connection.
//   allow   plain first; TLS on a new connection when the server refuses the plain one.
//
// The server refuses an attempt with an ErrorResponse before AuthenticationOk (pg_hba.conf's "no
// encryption", a client certificate missing, a failed password). libpq then makes the other
// attempt, and so does this socket: a new connection, sent pg's startup message again. pg never
// sees the refusal (its client, queued queries, type parsers and listeners stay); when the server
// asks for a password again, pg answers again. After AuthenticationOk bytes pass untouched, and
// an error from then on (a missing database) is final, as in libpq.
//
// Not a Duplex (a Readable buffers what it is pushed, a Writable spaces the writes of a cork out):
// an EventEmitter with the net.Socket members pg and pg-copy-streams' COPY FROM use (a unit test
// reads their code for them), as pg-cloudflare's socket is. Each event of the connection in use is
// re-emitted at once, in the order the socket emitted it, and each call goes straight to it: no
// byte is copied or held after authentication. cork() counts: pg corks an extended query so that
// its messages leave in one write; sent one by one, a backend killed while executing may not have
// read the Sync yet, and a socket closed with unread bytes is reset, so pg saw ECONNRESET instead
// of the server's "terminating connection".
import { EventEmitter } from 'node:events';
import { isIP, Socket } from 'node:net';
import { connect as tlsConnect, TLSSocket, type ConnectionOptions, type PeerCertificate } from 'node:tls';

/** One of libpq's attempts: TLS with these options, or false for plain. */
export type Attempt = ConnectionOptions | false;

/** Why a prefer/allow connection refuses COPY TO (db/pg-connection.ts refuses it before pg queues it). */
export const COPY_TO_REFUSED =
  'COPY TO through pg-copy-streams reads the connection as a Readable stream, which a connection with ' +
  'sslmode=prefer or allow (two attempts, db/pg-socket.ts) does not offer: give that client sslmode=disable, require or verify-full';

/** Int32 length 8, Int32 80877103: the SSLRequest message. */
const SSL_REQUEST = Buffer.from([0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]);
const [ERROR_RESPONSE, AUTHENTICATION, YES, NO] = [0x45, 0x52, 0x53, 0x4e]; // 'E', 'R', 'S', 'N'

/** How an attempt was refused: the server's ErrorResponse as received, or its connection's error. */
interface Refusal {
  tls: boolean;
  reply?: Buffer;
  error?: Error;
  code?: string;
  message: string;
}

/** The code and message fields of an ErrorResponse (Byte1 'E', Int32 length, fields, 0). */
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

/** Which of two refusals pg is told of: the second, unless it says nothing new. */
function decisive(first: Refusal, second: Refusal): Refusal {
  // allow's TLS attempt on a server without TLS: the plain attempt's answer counts.
  if (/does not support SSL/i.test(second.message)) return first;
  // prefer on a server that takes TLS only: the plain retry's "no encryption" says nothing new; the
  // TLS attempt's answer (a certificate that failed verification, a wrong password) is the one to act on.
  if (first.tls && second.code === '28000' && /no encryption/i.test(second.message)) return first;
  return second;
}

/** The socket a TidemarkPgClient's pg connection talks through when its sslmode has two attempts. */
export class SslModeSocket extends EventEmitter {
  readonly #plan: readonly Attempt[];
  #next = 0;
  #port = 0;
  #host = '';
  /** The TCP connection of the attempt under way; events of any other are ignored. */
  #tcp: Socket | undefined;
  /** What pg talks through: #tcp or TLS over it; undefined until the attempt has its connection. */
  #socket: Socket | undefined;
  #tls = false;
  #announced = false;
  /** pg's startup message, sent again by a next attempt. */
  #startup: Buffer | undefined;
  #authenticated = false;
  /** The start of a server message not yet whole, before AuthenticationOk. */
  #partial: Buffer | undefined;
  #refused: Refusal | undefined;
  #ending = false;
  #noDelay = true;
  #keepAlive: [boolean, number] = [false, 0];
  #unref = false;

  constructor(plan: readonly Attempt[]) {
    super();
    this.#plan = plan;
  }

  /** Whether the connection pg talks through, or whose refusal pg was told, uses TLS. */
  get tls(): boolean {
    return this.#tls;
  }

  get writable(): boolean {
    return this.#socket?.writable ?? false;
  }

  /**
   * pg's SCRAM-SHA-256-PLUS (enableChannelBinding) hashes the server certificate of its stream:
   * the TLS connection's. In plain, pg's own error (a server offers -PLUS over TLS only).
   */
  getPeerCertificate(detailed?: boolean): PeerCertificate {
    if (!(this.#socket instanceof TLSSocket))
      throw new Error('SASL: Mechanism SCRAM-SHA-256-PLUS requires a certificate');
    return this.#socket.getPeerCertificate(detailed);
  }

  /** pg's call, as on a net.Socket; 'connect' once pg may send its startup message. */
  connect(port: number, host: string): this {
    this.#port = port;
    this.#host = host;
    this.#attempt();
    return this;
  }

  write(chunk: Buffer, callback?: (err?: Error | null) => void): boolean {
    if (!this.#authenticated) this.#startup ??= Buffer.from(chunk);
    // Between attempts pg writes nothing (writable is false): it waits for the server.
    return this.#socket?.write(chunk, callback) ?? false;
  }

  end(): this {
    this.#ending = true;
    if (this.#socket) this.#socket.end();
    else this.#tcp?.destroy();
    return this;
  }

  destroy(err?: Error): this {
    this.#ending = true;
    (this.#socket ?? this.#tcp)?.destroy(err);
    return this;
  }

  /** pg corks its stream around an extended query: its messages leave in one write, as on a net.Socket. */
  cork(): void {
    this.#socket?.cork();
  }

  uncork(): void {
    this.#socket?.uncork();
  }

  /** Not a Readable (pg needs none): pg-copy-streams' COPY TO, which pauses and reads pg's stream, is refused. */
  pause(): never {
    throw new Error(COPY_TO_REFUSED);
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

  #attempt(): void {
    const tls = this.#plan[this.#next++]!;
    const tcp = new Socket();
    const live = () => this.#tcp === tcp;
    this.#tcp = tcp;
    this.#socket = undefined;
    this.#tls = tls !== false;
    this.#partial = undefined;
    tcp.setNoDelay(this.#noDelay);
    tcp.setKeepAlive(...this.#keepAlive);
    if (this.#unref) tcp.unref();
    tcp.on('error', (err) => live() && this.emit('error', err));
    tcp.on('close', (hadError) => live() && this.#closed(hadError));
    tcp.once('connect', () => {
      if (!live()) return;
      if (tls === false) return this.#use(tcp, tcp);
      tcp.write(SSL_REQUEST);
      tcp.once('data', (answer: Buffer) => live() && this.#answer(tcp, tls, answer));
    });
    tcp.connect(this.#port, this.#host);
  }

  /** The server's one-byte answer to the SSLRequest. */
  #answer(tcp: Socket, options: ConnectionOptions, answer: Buffer): void {
    if (answer.length === 1 && answer[0] === NO) {
      if (this.#plan[this.#next] !== false)
        return this.#refuse({ tls: true, message: 'The server does not support SSL connections' });
      // prefer: the plain attempt goes on this connection; libpq makes no other.
      this.#next = this.#plan.length;
      this.#tls = false;
      return this.#use(tcp, tcp);
    }
    if (answer.length !== 1 || answer[0] !== YES) {
      this.emit('error', new Error('There was an error establishing an SSL connection'));
      return void tcp.destroy();
    }
    // As pg: the host for the identity check; SNI for a name only (RFC 6066).
    const host = this.#host;
    const secure = tlsConnect({
      socket: tcp,
      host,
      ...options,
      ...(isIP(host) === 0 ? { servername: host } : {}),
    });
    secure.on('error', (err: Error & { code?: string }) => {
      if (this.#tcp !== tcp) return;
      if (this.#socket === secure) return void this.emit('error', err);
      this.#refuse({ tls: true, error: err, code: err.code, message: err.message });
    });
    secure.once('secureConnect', () => this.#tcp === tcp && this.#use(secure, tcp));
  }

  /** The attempt has its connection: pg talks through it. */
  #use(socket: Socket, tcp: Socket): void {
    this.#socket = socket;
    socket.on('data', (chunk: Buffer) => this.#tcp === tcp && this.#data(chunk));
    socket.on('end', () => this.#tcp === tcp && this.emit('end'));
    // pg-copy-streams waits for it when a write returns false.
    socket.on('drain', () => this.#tcp === tcp && this.emit('drain'));
    if (this.#announced) {
      socket.write(this.#startup!);
      return;
    }
    this.#announced = true;
    this.emit('connect');
  }

  #data(chunk: Buffer): void {
    if (this.#authenticated) {
      this.emit('data', chunk);
      return;
    }
    // Before AuthenticationOk: whole messages only, an ErrorResponse refuses the attempt.
    const got = this.#partial ? Buffer.concat([this.#partial, chunk]) : chunk;
    this.#partial = undefined;
    let at = 0;
    while (got.length - at >= 5) {
      const end = at + 1 + got.readUInt32BE(at + 1);
      if (end > got.length) break;
      if (got[at] === ERROR_RESPONSE) {
        if (at > 0) this.emit('data', got.subarray(0, at));
        const reply = Buffer.from(got.subarray(at, end));
        return this.#refuse({ tls: this.#tls, reply, ...errorFields(reply) });
      }
      if (got[at] === AUTHENTICATION && end - at === 9 && got.readUInt32BE(at + 5) === 0) {
        this.#authenticated = true;
        this.#startup = undefined;
        this.emit('data', got);
        return;
      }
      at = end;
    }
    if (at > 0) this.emit('data', got.subarray(0, at));
    if (at < got.length) this.#partial = got.subarray(at);
  }

  /** The attempt under way was refused: the next attempt, or pg is told. */
  #refuse(refusal: Refusal): void {
    if (this.#ending) return;
    const [tcp, socket] = [this.#tcp!, this.#socket];
    const first = this.#refused;
    // Reached from the TLS handshake, an "N" and the server's refusal of the startup only (a TCP
    // error before those goes to pg as it is): libpq makes its next attempt after any of them, a
    // handshake the server cut off (ECONNRESET) included.
    if (!first && this.#next < this.#plan.length) {
      this.#refused = refusal;
      this.#attempt();
      socket?.destroy();
      tcp.destroy();
      return;
    }
    const told = first ? decisive(first, refusal) : refusal;
    this.#tls = told.tls;
    if (told.reply) this.emit('data', told.reply);
    else this.emit('error', told.error ?? new Error(told.message));
    // pg hears 'close' once the connection is closed.
    socket?.destroy();
    tcp.destroy();
  }

  #closed(hadError: boolean): void {
    // What arrived before the close reaches pg before it (a message cut short, pg reports the close).
    const partial = this.#partial;
    this.#partial = undefined;
    if (partial) this.emit('data', partial);
    this.emit('close', hadError);
  }
}
