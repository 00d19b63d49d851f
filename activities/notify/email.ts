// E-mail over SMTP through nodemailer: TLS options, auth from the environment, HTML and text,
// attachments, and a deterministic Message-ID from the effect key. SMTP cannot say whether a
// message whose reply was lost was stored, so such a send is `unknown`, never retried blindly.
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type Nodemailer from 'nodemailer';
import type { EmailRequest } from '../../contract/effects.js';
import { EffectError, type Provider } from './provider.js';

// nodemailer is loaded when an e-mail provider is made (SMTP configured), not with the activities
// every worker imports. CommonJS, so required here as `import` would give it.
const load = createRequire(import.meta.url);

export interface SmtpSettings {
  host: string;
  port: number;
  secure: boolean;
  rejectUnauthorized: boolean;
  user?: string | undefined;
  password?: string | undefined;
  from: string;
  /** How long to wait for a reply; default 30 s. */
  socketTimeoutMs?: number;
}

/** The Message-ID of an effect: the same on every attempt, so a duplicate is recognisable downstream. */
export function messageIdFor(providerKey: string): string {
  return `<${createHash('sha256').update(providerKey).digest('hex').slice(0, 40)}@tidemark>`;
}

interface SmtpFailure {
  code?: string;
  responseCode?: number;
  command?: string;
  message?: string;
}

/** Tells a definite failure (the server said no, or nothing was sent) from an unknown outcome. */
export function classifySmtpError(err: unknown): EffectError {
  const e = (err ?? {}) as SmtpFailure;
  const reply = typeof e.responseCode === 'number' ? e.responseCode : undefined;
  const text = `smtp${e.command ? ` ${e.command}` : ''}: ${reply ? `${reply} ` : ''}${(e.message ?? String(err)).replace(/\s+/g, ' ').slice(0, 300)}`;
  if (reply !== undefined && reply >= 500) return new EffectError('rejected', text);
  if (reply !== undefined && reply >= 400) return new EffectError('not-sent', text);
  if (e.code === 'EENVELOPE') return new EffectError('rejected', text);
  // Only a connection that never opened is certainly not sent: nodemailer reports a connection
  // lost after DATA as command "CONN" too, so a broken conversation is an unknown outcome.
  if (/ECONNREFUSED|ENOTFOUND|EHOSTUNREACH|ENETUNREACH/.test(e.message ?? ''))
    return new EffectError('not-sent', text);
  return new EffectError('unknown', `${text} (the message may have been stored)`);
}

export function emailProvider(settings: SmtpSettings): Provider<EmailRequest> {
  const nodemailer = load('nodemailer') as typeof Nodemailer;
  /** SMTP takes timeouts, not a signal: within a deadline, each phase gets a third of the time left. */
  const transportWithin = (leftMs: number) =>
    nodemailer.createTransport({
      host: settings.host,
      port: settings.port,
      secure: settings.secure,
      tls: { rejectUnauthorized: settings.rejectUnauthorized },
      ...(settings.user ? { auth: { user: settings.user, pass: settings.password ?? '' } } : {}),
      connectionTimeout: Math.min(10_000, leftMs / 3),
      greetingTimeout: Math.min(10_000, leftMs / 3),
      socketTimeout: Math.min(settings.socketTimeoutMs ?? 30_000, leftMs / 3),
    });
  const transport = transportWithin(Infinity);
  return {
    channel: 'email',
    idempotent: () => false,
    async perform(request, providerKey, call) {
      try {
        const left = call?.timeLeftMs?.();
        const info = await (left === undefined ? transport : transportWithin(Math.max(1, left))).sendMail({
          from: settings.from,
          to: request.to,
          subject: request.subject,
          text: request.text,
          ...(request.html ? { html: request.html } : {}),
          attachments: (request.attachments ?? []).map((a) => ({
            filename: a.filename,
            content: Buffer.from(a.contentBase64, 'base64'),
            contentType: a.contentType,
            ...(a.cid ? { cid: a.cid } : {}),
          })),
          messageId: messageIdFor(providerKey),
        });
        return { providerId: info.messageId ?? null };
      } catch (err) {
        throw classifySmtpError(err);
      }
    },
  };
}
