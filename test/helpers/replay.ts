// The recorded histories that the replay test runs against the current workflow code
// (scripts/record-histories.ts writes them), and the options the real worker replays with.
import { readdir } from 'node:fs/promises';
import type { ReplayWorkerOptions } from '@temporalio/worker';
import { temporalDataConverter } from '../../codec/index.js';
import { bundleWorkflows } from '../../workers/create-worker.js';

export const historiesDir = new URL('../histories/', import.meta.url);
/**
 * The same scenarios recorded with payload encryption on (`npm run record-histories -- --encrypted`),
 * as a production history is: every payload AES-GCM encrypted with REPLAY_PAYLOAD_KEYS' test key.
 */
export const encryptedHistoriesDir = new URL('../histories/encrypted/', import.meta.url);

/** The recorder's payload key: a throwaway test key, never a production one. */
export const REPLAY_PAYLOAD_KEYS = Object.freeze({
  TIDEMARK_PAYLOAD_KEYS: `replay-test:${Buffer.alloc(32, 7).toString('base64')}`,
});
/** Histories recorded on earlier versions (named <what>-<commit>.history.json), kept so both replay. */
export const oldVersionsDir = new URL('../fixtures/', import.meta.url);

/** The recorder's channel secrets: distinctive, so that a history holding one is found. */
export const RECORDING_SECRETS = Object.freeze({
  smtpUser: 'replay-recorder',
  smtpPassword: 'replay-smtp-password-0f3a9c',
  slackToken: 'xoxb-replay-slack-token-7d21e4',
  telegramToken: '4242:replay-telegram-token-b85c',
});

/** The secrets (and connection strings) found in a history's text; none may be. */
export function secretsIn(text: string): string[] {
  const found: string[] = Object.values(RECORDING_SECRETS)
    .filter((s) => s !== RECORDING_SECRETS.smtpUser)
    .filter((s) => text.includes(s));
  if (/postgres(ql)?:\/\//i.test(text)) found.push('a PostgreSQL URL');
  return found;
}

/** The history files of the current version, by name (without .json), sorted. */
export async function historyNames(dir: URL = historiesDir): Promise<string[]> {
  return (await readdir(dir))
    .filter((f) => f.endsWith('.json'))
    .map((f) => f.slice(0, -'.json'.length))
    .sort();
}

/** The files of the earlier versions' histories, sorted. */
export async function oldVersionFiles(): Promise<URL[]> {
  return (await readdir(oldVersionsDir))
    .filter((f) => f.endsWith('.history.json'))
    .sort()
    .map((f) => new URL(f, oldVersionsDir));
}

/**
 * What the real worker replays with (workers/worker.ts without payload keys): its bundle, made as
 * bundleWorkflows() makes it, and its data converter. The histories are recorded with plain payloads.
 */
export async function replayOptions(): Promise<ReplayWorkerOptions> {
  return {
    workflowBundle: await bundleWorkflows({ encryptFailures: false }),
    dataConverter: temporalDataConverter({}),
  };
}

/**
 * What a worker with payload keys replays with (the recorder's throwaway test key): its bundle with the failure
 * converter that encrypts failures, and the AES-GCM codec, which reads plain payloads as they are.
 */
export async function encryptingReplayOptions(): Promise<ReplayWorkerOptions> {
  return {
    workflowBundle: await bundleWorkflows({ encryptFailures: true }),
    dataConverter: temporalDataConverter(REPLAY_PAYLOAD_KEYS),
  };
}
