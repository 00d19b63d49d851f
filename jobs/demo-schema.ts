import { ledger } from '../db/ledger-schema.js';
export const DEMO_SCHEMA = 'public';
export const demo = ledger(DEMO_SCHEMA);
