// The page's or the Slack app's word that a person asked for a rerun or decided one: an HMAC, keyed
// with TIDEMARK_DECISION_KEY that only they and the workers hold. A decision's covers the request
// and the very run of its workflow (a request id started again is another run: an old signature
// read from a history opens nothing there), the decision, the person's name, where it was made,
// the preview they approved and their note, and who they are (subject, display name, roles, the
// session or token). A request's covers the request, its window, its reason and who asked. A
// Temporal client without the key can make neither, so a decision is never a bare name.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { DecisionActor } from '../contract/workflows.js';

export interface DecisionClaim {
  readonly request: string;
  /** The run id of the request's workflow, as the signer found it open. */
  readonly run: string;
  readonly decision: string;
  readonly by: string;
  readonly source: string;
  readonly actor: DecisionActor;
  readonly previewDigest?: string;
  readonly note?: string;
}

export interface RequestClaim {
  readonly request: string;
  readonly job: string;
  readonly windowStart: string;
  readonly reason: string;
  readonly requestedBy: string;
  /** How long it waits for a decision (a client must not keep it open, or close it, at will). */
  readonly timeoutMs: number | null;
  readonly actor: DecisionActor;
}

const actorFields = (a: DecisionActor) => [a.subject, a.displayName, [...a.roles], a.credential];

// JSON of a fixed list: no field's text can be mistaken for another's.
const mac = (key: string, fields: unknown[]) =>
  createHmac('sha256', key).update(JSON.stringify(fields)).digest('hex');

const same = (want: string, proof: string) => {
  const a = Buffer.from(want, 'hex');
  const b = Buffer.from(/^[0-9a-f]{64}$/.test(proof) ? proof : '', 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
};

export const decisionProof = (key: string, c: DecisionClaim): string =>
  mac(key, [
    'tidemark decision v2',
    c.request,
    c.run,
    c.decision,
    c.by,
    c.source,
    c.previewDigest ?? '',
    c.note ?? '',
    ...actorFields(c.actor),
  ]);

export const isDecisionProof = (key: string, c: DecisionClaim, proof: string): boolean =>
  same(decisionProof(key, c), proof);

export const requestProof = (key: string, c: RequestClaim): string =>
  mac(key, [
    'tidemark request v2',
    c.request,
    c.job,
    c.windowStart,
    c.reason,
    c.requestedBy,
    c.timeoutMs,
    ...actorFields(c.actor),
  ]);

export const isRequestProof = (key: string, c: RequestClaim, proof: string): boolean =>
  same(requestProof(key, c), proof);

/** `d` with its signature when the key is given; without a key, as it came. */
export function signed<D extends DecisionClaim>(key: string | undefined, d: D): D & { proof?: string } {
  return key ? { ...d, proof: decisionProof(key, d) } : d;
}
