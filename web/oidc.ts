// Sign-in through the company's identity provider: OpenID Connect's authorization code flow with
// PKCE (openid-client). The provider is discovered on the first sign-in (a provider that is down
// when the page starts does not stop the page). What a login needs between leaving and coming back
// (the PKCE verifier, the nonce) stays in the database under the state's hash; the browser holds
// only the state, in a cookie that binds the login to the browser that began it.
import * as client from 'openid-client';
import type { Kysely } from 'kysely';
import { rolesOf, type RoleGrant } from '../contract/roles.js';
import type { Database } from '../db/schema.js';
import { HttpError } from './errors.js';
import { sha256Hex, type Actor } from './sessions.js';

export interface OidcSettings {
  readonly issuer: string;
  readonly clientId: string;
  readonly clientSecret?: string;
  /** The page's address as browsers reach it: the provider sends them back to <it>/auth/callback. */
  readonly webUrl: string;
  readonly scopes: string;
  readonly nameClaim: string;
  readonly rolesClaim: string;
  readonly grants: readonly RoleGrant[];
}

/** How long a person may take at the provider's sign-in page. */
const LOGIN_MS = 10 * 60_000;

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/** A person as the provider vouched for them, or the reason they may not sign in. */
export type SignIn = { who: Omit<Actor, 'credential'> } | { refused: string };

export function oidcLogin(s: OidcSettings, db: Kysely<Database>, now: () => Date) {
  const redirectUri = new URL('auth/callback', s.webUrl.endsWith('/') ? s.webUrl : `${s.webUrl}/`).href;
  let discovered: Promise<client.Configuration> | null = null;
  /** The provider's configuration, discovered once; a failed discovery is tried again next time. */
  function provider(): Promise<client.Configuration> {
    if (!discovered) {
      const issuer = new URL(s.issuer);
      const mine = client
        .discovery(
          issuer,
          s.clientId,
          undefined,
          s.clientSecret ? client.ClientSecretPost(s.clientSecret) : client.None(),
          // Plain HTTP only to a provider on this machine (a trial, the tests); https otherwise.
          issuer.protocol === 'http:' && LOOPBACK.has(issuer.hostname)
            ? { execute: [client.allowInsecureRequests] }
            : undefined,
        )
        .catch((err: Error) => {
          discovered = null;
          throw new HttpError(
            503,
            `the identity provider at ${s.issuer} could not be reached (${err.message}); try again in a moment`,
          );
        });
      discovered = mine;
    }
    return discovered;
  }

  /** The person the provider's tokens name, with their roles; or why they may not sign in. */
  async function personOf(
    config: client.Configuration,
    tokens: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers,
  ): Promise<SignIn> {
    const idClaims = tokens.claims()!;
    let claims: Record<string, unknown> = { ...idClaims };
    // Groups and names often come from the userinfo endpoint only.
    if (claims[s.rolesClaim] === undefined || claims[s.nameClaim] === undefined) {
      const info = await client.fetchUserInfo(config, tokens.access_token, idClaims.sub).catch(() => ({}));
      claims = { ...info, ...claims };
    }
    const roles = rolesOf(claims[s.rolesClaim], s.grants);
    const name = typeof claims[s.nameClaim] === 'string' ? (claims[s.nameClaim] as string).trim() : '';
    if (!name)
      return {
        refused: `the identity provider gave no "${s.nameClaim}" claim (TIDEMARK_OIDC_NAME_CLAIM) for ${idClaims.sub}: tidemark needs a name for each person`,
      };
    // Letters, digits and . _ @ + - only: no invisible or look-alike characters that would make one
    // name read as another's in Slack or the audit.
    if (!/^[\p{L}\p{N}][\p{L}\p{N}._@+-]{0,99}$/u.test(name))
      return {
        refused: `the "${s.nameClaim}" claim of ${idClaims.sub} is not a name tidemark can use (letters, digits, ".", "_", "@", "+" or "-", at most 100): set TIDEMARK_OIDC_NAME_CLAIM to another claim`,
      };
    if (roles.length === 0)
      return {
        refused: `${name} is signed in but has no role in tidemark: none of their groups (claim "${s.rolesClaim}") is mapped in TIDEMARK_OIDC_ROLES (${s.grants.map((g) => g.group).join(', ')}); ask an administrator`,
      };
    // The name shown: without control, format (zero-width, bidirectional) or line characters.
    const shown =
      typeof claims.name === 'string'
        ? claims.name
            .replace(/[\s\p{Zl}\p{Zp}]+/gu, ' ')
            .replace(/\p{C}/gu, '')
            .trim()
            .slice(0, 200)
        : '';
    const displayName = shown || name;
    return { who: { subject: idClaims.sub, name, displayName, roles, verified: true } };
  }

  return {
    redirectUri,

    /** Where to send the browser, and the state its cookie keeps until it comes back. */
    async begin(): Promise<{ url: string; state: string }> {
      const config = await provider();
      const verifier = client.randomPKCECodeVerifier();
      const state = client.randomState();
      const nonce = client.randomNonce();
      const t = now();
      await db.deleteFrom('web_logins').where('expires_at', '<=', t).execute();
      await db
        .insertInto('web_logins')
        .values({
          state: sha256Hex(state),
          verifier,
          nonce,
          expires_at: new Date(t.getTime() + LOGIN_MS),
        })
        .execute();
      const url = client.buildAuthorizationUrl(config, {
        redirect_uri: redirectUri,
        scope: s.scopes,
        code_challenge: await client.calculatePKCECodeChallenge(verifier),
        code_challenge_method: 'S256',
        state,
        nonce,
      });
      return { url: url.href, state };
    },

    /** Starts the device flow for the CLI (`tidemark login`): the page is the client, so the CLI holds no client secret. */
    async deviceStart(): Promise<DeviceStart> {
      const config = await provider();
      const d = await client.initiateDeviceAuthorization(config, { scope: s.scopes }).catch((err: Error) => {
        throw new HttpError(
          502,
          `the identity provider refused the device sign-in (${err.message}); does it allow the device flow for client ${s.clientId}?`,
        );
      });
      return {
        deviceCode: d.device_code,
        userCode: d.user_code,
        verificationUri: d.verification_uri,
        verificationUriComplete: d.verification_uri_complete ?? null,
        interval: d.interval ?? 5,
        expiresIn: d.expires_in,
      };
    },

    /** One poll of the device flow: still waiting (slower, when told), or the person, or why not. */
    async deviceFinish(deviceCode: string): Promise<{ pending: true; slowDown: boolean } | SignIn> {
      const config = await provider();
      let tokens;
      try {
        tokens = await client.genericGrantRequest(config, 'urn:ietf:params:oauth:grant-type:device_code', {
          device_code: deviceCode,
        });
      } catch (err) {
        const code = (err as { error?: string }).error;
        if (code === 'authorization_pending' || code === 'slow_down')
          return { pending: true, slowDown: code === 'slow_down' };
        return {
          refused:
            code === 'expired_token'
              ? 'the code expired before it was entered: run npx tidemark login again'
              : code === 'access_denied'
                ? 'the sign-in was declined at the identity provider'
                : `the identity provider refused the device sign-in: ${(err as Error).message}`,
        };
      }
      if (!tokens.id_token)
        return { refused: 'the identity provider gave no ID token: add "openid" to TIDEMARK_OIDC_SCOPES' };
      return personOf(config, tokens);
    },

    /**
     * The person coming back with `query` (the callback's query string), in the browser whose login
     * cookie holds `state`. Each login is used once.
     */
    async finish(query: string, state: string | undefined): Promise<SignIn> {
      const back = new URLSearchParams(query);
      if (back.get('error'))
        return {
          refused: `the identity provider did not sign you in: ${back.get('error')}${back.get('error_description') ? ` (${back.get('error_description')})` : ''}`,
        };
      if (!state || back.get('state') !== state)
        return { refused: 'this sign-in was not begun in this browser, or took too long: sign in again' };
      const row = await db
        .deleteFrom('web_logins')
        .where('state', '=', sha256Hex(state))
        .returningAll()
        .executeTakeFirst();
      if (!row || now().getTime() >= row.expires_at.getTime())
        return { refused: 'this sign-in expired or was already used: sign in again' };
      const config = await provider();
      let tokens;
      try {
        tokens = await client.authorizationCodeGrant(config, new URL(`${redirectUri}?${back}`), {
          pkceCodeVerifier: row.verifier,
          expectedState: state,
          expectedNonce: row.nonce,
          idTokenExpected: true,
        });
      } catch (err) {
        return { refused: `the identity provider's answer was refused: ${(err as Error).message}` };
      }
      return personOf(config, tokens);
    },
  };
}

export type OidcLogin = ReturnType<typeof oidcLogin>;

/** What `tidemark login` shows its user, and the code it polls with. */
export interface DeviceStart {
  readonly deviceCode: string;
  readonly userCode: string;
  readonly verificationUri: string;
  readonly verificationUriComplete: string | null;
  readonly interval: number;
  readonly expiresIn: number;
}
