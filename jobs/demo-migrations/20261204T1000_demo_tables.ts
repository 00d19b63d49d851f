// The demo's tables, in a schema of their own (tidemark_demo). Release 0.1.0 created them with the
// ledger, in the ledger's schema; they are the demo catalog's now, created only where it runs.
// Forward only: a change is a new file (this text names its schema, never a variable's value).
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    create schema if not exists tidemark_demo;
    create table tidemark_demo.orders (
      order_key text primary key,
      placed_at timestamptz not null,
      amount numeric(14, 2));
    create index orders_placed_at_idx on tidemark_demo.orders (placed_at);
    create table tidemark_demo.daily_sales (
      job text not null,
      day date not null,
      order_count integer not null,
      total numeric(16, 2) not null default 0,
      constraint daily_sales_pk primary key (job, day));
    create table tidemark_demo.sales_window_totals (
      job text not null,
      window_start timestamptz not null,
      generation integer not null,
      day date not null,
      order_count integer not null,
      total numeric(16, 2) not null,
      constraint sales_window_totals_pk primary key (job, window_start, generation, day));
    create table tidemark_demo.raw_events (
      id bigserial primary key,
      occurred_at timestamptz not null,
      kind text not null,
      value numeric(14, 2) not null);
    create index raw_events_occurred_idx on tidemark_demo.raw_events (occurred_at, id);
    create table tidemark_demo.daily_event_stats (
      job text not null,
      day date not null,
      kind text not null,
      events integer not null,
      total numeric(18, 2) not null,
      constraint daily_event_stats_pk primary key (job, day, kind));
    create table tidemark_demo.batch_checkpoints (
      window_key text not null,
      chunk integer not null,
      rows integer not null,
      committed_at timestamptz not null default now(),
      constraint batch_checkpoints_pk primary key (window_key, chunk));
    create table tidemark_demo.batch_partials (
      window_key text not null,
      chunk integer not null,
      day date not null,
      kind text not null,
      events integer not null,
      total numeric(18, 2) not null);
    create index batch_partials_window_idx on tidemark_demo.batch_partials (window_key);
    create table tidemark_demo.price_updates (
      id bigserial primary key,
      sku text not null,
      price numeric(12, 2) not null,
      stock integer not null,
      effective_at timestamptz not null);
    create index price_updates_effective_idx on tidemark_demo.price_updates (effective_at, sku);
    create table tidemark_demo.marketplace_items (
      marketplace text not null,
      sku text not null,
      version timestamptz not null,
      price numeric(12, 2) not null,
      stock integer not null,
      window_key text not null,
      status text not null check (status in ('pending', 'applied', 'rejected')),
      reason text,
      updated_at timestamptz not null default now(),
      constraint marketplace_items_pk primary key (marketplace, sku));
  `.execute(db);
}
