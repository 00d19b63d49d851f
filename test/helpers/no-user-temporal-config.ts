// Imported for its effect by the test helpers: the tests choose their own Temporal server, namespace and
// credentials. A developer's own profile (~/.config/temporalio/temporal.toml, which `temporal config set`
// writes, or one under XDG_CONFIG_HOME) would otherwise be read by every test process and every child it
// spawns: its namespace, TLS and API key used against the tests' dev servers. The default file is looked
// up under XDG_CONFIG_HOME first; pointing it at an empty directory leaves TEMPORAL_CONFIG_FILE (which a
// test sets explicitly when it means to use a profile) as the only way in.
import { mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const empty = join(tmpdir(), 'tidemark-tests-no-user-config');
if (process.env.XDG_CONFIG_HOME !== empty) {
  mkdirSync(empty, { recursive: true });
  process.env.XDG_CONFIG_HOME = empty;
}
