// The page's or the Slack app's word that a person made a decision: an HMAC, keyed with
// TIDEMARK_DECISION_KEY that only they and the workers hold, over the request, the decision, the
// person's name, where it was made and who they are (subject, display name, roles, the session or
// token). A Temporal client without the key cannot make one, so a decision is never a bare name.
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { DecisionActor } from '../contract/workflows.js';

export interface DecisionClaim {
  readonly request: string;
  readonly decision: string;
  readonly by: string;
  readonly source: string;
  readonly actor: DecisionActor;
}

export function decisionProof(key: string, c: DecisionClaim): string {
  // JSON of a fixed list: no field's text can be mistaken for another's.
  const fields = [
    'tidemark decision v1',
    c.request,
    c.decision,
    c.by,
    c.source,
    c.actor.subject,
    c.actor.displayName,
    [...c.actor.roles],
    c.actor.credential,
  ];
  return createHmac('sha256', key).update(JSON.stringify(fields)).digest('hex');
}

export function isDecisionProof(key: string, c: DecisionClaim, proof: string): boolean {
  const want = Buffer.from(decisionProof(key, c), 'hex');
  const got = Buffer.from(/^[0-9a-f]{64}$/.test(proof) ? proof : '', 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}

/** `d` with the actor and, when the key is given, the signature; without a key, as it came. */
export function signed<D extends DecisionClaim>(key: string | undefined, d: D): D & { proof?: string } {
  return key ? { ...d, proof: decisionProof(key, d) } : d;
}
