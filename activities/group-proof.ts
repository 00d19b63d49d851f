// The Slack app's word that a person is in the approver group: an HMAC, keyed with the Slack
// signing secret that only the Slack app and the workers hold, over the request, the person,
// the decision and the group. A Temporal client without the secret cannot make one, so
// membership is never a bare claim.
import { createHmac, timingSafeEqual } from 'node:crypto';

export interface GroupClaim {
  readonly request: string;
  readonly by: string;
  readonly decision: string;
  readonly group: string;
}

export function groupProof(secret: string, c: GroupClaim): string {
  return createHmac('sha256', secret)
    .update(['tidemark approver group v1', c.request, c.by, c.decision, c.group].join('\n'))
    .digest('hex');
}

export function isGroupProof(secret: string, c: GroupClaim, proof: string): boolean {
  const want = Buffer.from(groupProof(secret, c), 'hex');
  const got = Buffer.from(/^[0-9a-f]{64}$/.test(proof) ? proof : '', 'hex');
  return got.length === want.length && timingSafeEqual(got, want);
}
