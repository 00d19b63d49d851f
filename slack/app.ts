// The Slack app (@slack/bolt over HTTP): Approve and Reject buttons on rerun requests. Bolt
// verifies every request's signature and timestamp (refusing forged, tampered or stale ones
// with 401); the app acknowledges at once and then decides through the rerun workflow's
// Update, whose validator accepts only configured approvers. A clicker decides under their
// tidemark name (config/people.ts), so the requester is recognised whichever interface they used;
// a Slack user with no name is refused. Membership of the approver group is checked here and
// vouched for with a proof only the Slack app (and the workers that check it) can make. A refused
// decision is audited and the clicker is told why.
import { slackEscape } from '../contract/slack-text.js';
import type { Client } from '@temporalio/client';
import boltPkg from '@slack/bolt';
import type { Kysely } from 'kysely';
import type { Logger } from '../activities/logger.js';
import type { Database } from '../db/schema.js';
import { decideUnknownEffect } from '../activities/decisions.js';
import type { ActivityDeps } from '../activities/deps.js';
import { nameOfSlackUser, type Directory } from '../config/people.js';
import { decide, DecisionRefused, openRun } from '../operator/reruns.js';
import { groupProof } from '../activities/group-proof.js';
import { signed } from '../activities/decision-proof.js';

const { App, HTTPReceiver, LogLevel } = boltPkg;

export interface SlackAppOptions {
  signingSecret: string;
  botToken: string;
  /** Slack's Web API base, e.g. https://slack.com/api (a loopback server in tests). */
  apiUrl: string;
  temporal: Client;
  db: Kysely<Database>;
  logger: Logger;
  port: number;
  /** For decisions on effects whose outcome is unknown (the same approvers as reruns). */
  deps: ActivityDeps;
  /** People and approvers by name, with their Slack user ids. */
  directory: Directory;
  /** A Slack user group whose members (who have a name) may decide as well. */
  approverGroup?: string;
  /**
   * TIDEMARK_DECISION_KEY: each rerun decision carries the app's signature over the Slack user it
   * verified (activities/decision-proof.ts), for workers that take only signed decisions.
   */
  decisionKey?: string;
}

export async function startSlackApp(o: SlackAppOptions): Promise<{ stop(): Promise<void> }> {
  const receiver = new HTTPReceiver({
    signingSecret: o.signingSecret,
    endpoints: '/slack/events',
    processBeforeResponse: false,
    logLevel: process.env.TIDEMARK_SLACK_DEBUG ? LogLevel.DEBUG : LogLevel.ERROR,
  });
  const app = new App({
    token: o.botToken,
    receiver,
    tokenVerificationEnabled: false,
    logLevel: process.env.TIDEMARK_SLACK_DEBUG ? LogLevel.DEBUG : LogLevel.ERROR,
    clientOptions: { slackApiUrl: `${o.apiUrl.replace(/\/$/, '')}/` },
  });
  /** The approver group, when the user is a member of it (asked of Slack at each decision). */
  async function groupOf(
    client: { usergroups: { users: { list(a: { usergroup: string }): Promise<{ users?: string[] }> } } },
    user: string,
  ): Promise<string | undefined> {
    if (!o.approverGroup) return undefined;
    const members = await client.usergroups.users
      .list({ usergroup: o.approverGroup })
      .catch(() => ({ users: [] as string[] }));
    return members.users?.includes(user) ? o.approverGroup : undefined;
  }

  const approvers = o.directory.approvers;
  const approversText = approvers.length
    ? ` (approvers: ${approvers.join(', ')}${o.approverGroup ? ` or members of ${o.approverGroup}` : ''})`
    : o.approverGroup
      ? ` (members of ${o.approverGroup})`
      : ' (no approvers are configured)';
  /** A Slack user's tidemark name, or the reason they have none. */
  const nameOf = (user: string): { name: string } | { refused: string } => {
    const name = nameOfSlackUser(o.directory, user);
    return name
      ? { name }
      : {
          refused: `Slack user ${user} has no tidemark name: add name=${user} to TIDEMARK_PEOPLE (or TIDEMARK_APPROVERS) so the same person is known in the CLI, the page and Slack`,
        };
  };

  app.action(/^rerun_(approve|reject)$/, async ({ ack, body, action, client }) => {
    await ack();
    if (body.type !== 'block_actions' || action.type !== 'button') return;
    const decision = (action as { action_id: string }).action_id === 'rerun_approve' ? 'approve' : 'reject';
    const user = body.user.id;
    const request = action.value ?? '';
    const tell = (text: string) =>
      body.channel?.id
        ? client.chat
            .postEphemeral({ channel: body.channel.id, user, text: slackEscape(text) })
            .catch(() => undefined)
        : undefined;
    const who = nameOf(user);
    if ('refused' in who) {
      await o.db
        .insertInto('approval_audit')
        .values({ request, actor: user, decision, accepted: false, reason: who.refused, source: 'slack' })
        .execute()
        .catch((err: Error) => o.logger.warn(`SLACK could not audit a refusal: ${err.message}`));
      o.logger.warn(`SLACK Not accepted: ${who.refused}`);
      await tell(`Not accepted: ${who.refused}`);
      return;
    }
    const by = who.name;
    try {
      const viaGroup = approvers.includes(by) ? undefined : await groupOf(client, user);
      // The person is the Slack user Slack signed the click for, by their tidemark name.
      const run = await openRun(o.temporal, request);
      const verified = {
        request,
        run: run ?? '',
        decision,
        by,
        source: 'slack',
        actor: { subject: `slack:${user}`, displayName: by, roles: [], credential: `slack:${user}` },
      } as const;
      await decide(
        o.temporal,
        o.db,
        request,
        {
          ...(o.decisionKey ? signed(o.decisionKey, verified) : verified),
          ...(viaGroup
            ? {
                viaGroup,
                groupProof: groupProof(o.signingSecret, { request, by, decision, group: viaGroup }),
              }
            : {}),
        },
        run,
      );
      o.logger.info(`SLACK decision ${decision} by ${by} (${user}) on ${request}`);
    } catch (err) {
      const text =
        err instanceof DecisionRefused
          ? `Not accepted: ${err.message}`
          : `Could not record your decision: ${(err as Error).message}`;
      o.logger.warn(`SLACK ${text}`);
      await tell(text);
    }
  });
  // The same approval unblocks an effect left `unknown`: resend it, or skip it.
  app.action(/^effect_(resend|skip)$/, async ({ ack, body, action, client }) => {
    await ack();
    if (body.type !== 'block_actions') return;
    const a = action as { action_id: string; value?: string };
    const decision = a.action_id === 'effect_resend' ? 'resend' : 'skip';
    const key = a.value ?? '';
    const user = body.user.id;
    const tell = (text: string) =>
      body.channel?.id
        ? client.chat
            .postEphemeral({ channel: body.channel.id, user, text: slackEscape(text) })
            .catch(() => undefined)
        : undefined;
    const who = nameOf(user);
    const by = 'name' in who ? who.name : user;
    if ('refused' in who || (!approvers.includes(by) && !(await groupOf(client, user)))) {
      const reason = 'refused' in who ? who.refused : `${by} may not decide effects${approversText}`;
      await o.db
        .insertInto('approval_audit')
        .values({ request: key, actor: by, decision, accepted: false, reason, source: 'slack' })
        .execute();
      await tell(`Not accepted: ${reason}`);
      return;
    }
    let r: Awaited<ReturnType<typeof decideUnknownEffect>>;
    try {
      r = await decideUnknownEffect(o.deps, key, decision, by);
    } catch (err) {
      await o.db
        .insertInto('approval_audit')
        .values({
          request: key,
          actor: by,
          decision,
          accepted: false,
          reason: (err as Error).message,
          source: 'slack',
        })
        .execute();
      await tell(`Not accepted: ${(err as Error).message}`);
      return;
    }
    // The decision has applied: an audit that cannot be written is reported as that, never as a refusal.
    const unaudited = await o.db
      .insertInto('approval_audit')
      .values({ request: key, actor: by, decision, accepted: true, reason: null, source: 'slack' })
      .execute()
      .then(
        () => '',
        (err: Error) => {
          o.logger.error(
            `SLACK ${decision} of ${key} by ${by} applied but could not be audited: ${err.message}`,
          );
          return ` (applied, but the audit could not be written: ${err.message})`;
        },
      );
    await tell(`${key}: ${r.outcome}${unaudited}`);
  });
  await app.start(o.port);
  return {
    stop: async () => {
      await app.stop();
    },
  };
}
