// Job kind "marketplace price and stock updates": the latest price and stock of each product
// changed in the window, pushed to each marketplace's HTTP API with absolute set semantics, in
// batches, an Idempotency-Key per item and window, and a version guard so an older window (a
// backfill) never overwrites a newer price. Items a marketplace rejects are set aside with
// their reason; the rest go through.
import { sql } from 'kysely';
import { demo, DEMO_SCHEMA, demoTable } from './demo-schema.js';
import type { JobSpec, WindowEffect, WindowHandler, WindowSettler } from '../schedules/job.js';

export interface Marketplace {
  name: string;
  /** Base URL of its API; items go to POST <url>/v1/items:batchUpdate. */
  url: string;
  /** Items per request; default 100. */
  batchSize?: number;
}

export interface MarketplaceOptions extends Omit<JobSpec, 'handler' | 'seed' | 'settle'> {
  marketplaces: Marketplace[];
}

export interface ItemUpdate {
  sku: string;
  price: string;
  stock: number;
  version: string;
  idempotencyKey: string;
}
export interface ItemResult {
  sku: string;
  status: 'applied' | 'stale' | 'rejected';
  reason?: string;
}

export function marketplacePush(opts: MarketplaceOptions): JobSpec {
  const { marketplaces, ...spec } = opts;

  const handler: WindowHandler = async ({ trx, window, key }) => {
    const effects: WindowEffect[] = [];
    const counted = await sql<{ n: number }>`
      select count(distinct sku)::int as n from ${demo.price_updates} where effective_at >= ${window.start} and effective_at < ${window.end}`.execute(
      trx,
    );
    const input = counted.rows[0]!.n;
    let pushed = 0;
    for (const m of marketplaces) {
      // The latest change of each product in the window, recorded for this marketplace unless a
      // newer version was recorded already (the guard against older windows).
      const r = await sql<{ sku: string; price: string; stock: number; version: Date }>`
        with latest as (
          select distinct on (sku) sku, price, stock, effective_at from ${demo.price_updates}
           where effective_at >= ${window.start} and effective_at < ${window.end}
           order by sku, effective_at desc
        ), recorded as (
          insert into ${demo.marketplace_items} (marketplace, sku, version, price, stock, window_key, status)
          select ${m.name}, sku, effective_at, price, stock, ${key}, 'pending' from latest
          on conflict (marketplace, sku) do update
            set version = excluded.version, price = excluded.price, stock = excluded.stock,
                window_key = excluded.window_key, status = 'pending', reason = null, updated_at = now()
            where marketplace_items.version < excluded.version
          returning sku, price::text, stock, version
        )
        select * from recorded order by sku`.execute(trx);
      pushed += r.rows.length;
      const size = m.batchSize ?? 100;
      for (let i = 0; i < r.rows.length; i += size) {
        const items: ItemUpdate[] = r.rows.slice(i, i + size).map((x) => ({
          sku: x.sku,
          price: x.price,
          stock: x.stock,
          version: x.version.toISOString(),
          idempotencyKey: `${key}:${m.name}:${x.sku}`,
        }));
        effects.push({
          name: `push:${m.name}:${i / size + 1}`,
          channel: 'http',
          policy: 'resend',
          request: {
            method: 'POST',
            url: `${m.url.replace(/\/$/, '')}/v1/items:batchUpdate`,
            body: { items },
          },
        });
      }
    }
    return { input, applied: input, quarantined: 0, effects, details: { pushed, batches: effects.length } };
  };

  /** Per-item answers: applied ones marked so, rejected ones set aside with the marketplace's reason. */
  const settle: WindowSettler = async ({ ledger, job, window, key, generation, effects }) => {
    for (const e of effects) {
      const m = /^push:(.+):\d+$/.exec(e.name)?.[1];
      const results = (e.result as { results?: ItemResult[] } | null)?.results;
      if (!m || e.status !== 'done' || !Array.isArray(results)) continue;
      // On the ledger's handle: the quarantine is tidemark's; the demo's table names its schema.
      await ledger.transaction().execute(async (trx) => {
        for (const item of results) {
          const rejected = item.status === 'rejected';
          await trx
            .withSchema(DEMO_SCHEMA)
            .updateTable('marketplace_items')
            .set({
              status: rejected ? 'rejected' : 'applied',
              reason:
                item.reason ?? (item.status === 'stale' ? 'the marketplace holds a newer version' : null),
              updated_at: new Date(),
            })
            .where('marketplace', '=', m)
            .where('sku', '=', item.sku)
            .where('window_key', '=', key)
            .execute();
          if (rejected) {
            // The ledger's (the handle's plugin names its schema).
            await trx
              .insertInto('quarantine')
              .values({
                job: job.name,
                window_start: window.start,
                generation,
                record_key: `${m}:${item.sku}`,
                reason: `${m} rejected ${item.sku}: ${item.reason ?? 'no reason given'}`,
                payload: JSON.stringify(item),
              })
              .onConflict((oc) => oc.doNothing())
              .execute();
          }
        }
      });
    }
  };

  return {
    description: `Prices and stock to ${marketplaces.map((m) => m.name).join(', ')}`,
    ...spec,
    writes: [{ table: demoTable('marketplace_items'), key: ['marketplace', 'sku'] }],
    handler,
    settle,
  };
}
