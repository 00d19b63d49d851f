// deploy/kubernetes/tidemark.yaml checked without a cluster: every object valid against the
// Kubernetes API's schema (kubernetes-models), every container running a tidemark command that
// exists, the workers' probes on the paths and port the worker serves, and the processes of
// docs/deploy.md all there.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { ConfigMap, Service } from 'kubernetes-models/v1';
import { Deployment } from 'kubernetes-models/apps/v1';
import { Job } from 'kubernetes-models/batch/v1';
import type { IContainer } from 'kubernetes-models/v1';
import { COMMANDS } from '../../cli/main.js';
import { SERVICES } from '../../cli/services.js';
import { loadConfig } from '../../config/env.js';
import { checkSignIn } from '../../web/main.js';

const file = fileURLToPath(new URL('../../deploy/kubernetes/tidemark.yaml', import.meta.url));
const docs = parseAllDocuments(readFileSync(file, 'utf8')).map((d) => d.toJS() as { kind: string });
const MODELS: Record<string, new (data: never) => { validate(): void }> = {
  ConfigMap,
  Service,
  Deployment,
  Job,
};

const named = <T>(kind: string, name: string) =>
  docs.find((d) => d.kind === kind && (d as { metadata?: { name?: string } }).metadata?.name === name) as
    T | undefined;
const containersOf = (d: {
  spec?: { template?: { spec?: { containers?: IContainer[]; initContainers?: IContainer[] } } };
}) => [...(d.spec?.template?.spec?.initContainers ?? []), ...(d.spec?.template?.spec?.containers ?? [])];

test('every object of the manifest is valid against the Kubernetes API schema', () => {
  assert.ok(docs.length >= 6);
  for (const doc of docs) {
    const Model = MODELS[doc.kind];
    assert.ok(Model, `a ${doc.kind} is checked`);
    assert.doesNotThrow(() => new Model(doc as never).validate(), `${doc.kind} is valid`);
  }
});

test('the schema check refuses what Kubernetes refuses', () => {
  const worker = named<Record<string, unknown>>('Deployment', 'tidemark-worker')!;
  const broken = structuredClone(worker) as { spec: { replicas: unknown } };
  broken.spec.replicas = 'two';
  assert.throws(() => new Deployment(broken as never).validate());
});

test('each container runs a tidemark command that exists, with the settings of one ConfigMap and Secret', () => {
  const known = new Set([...COMMANDS.map((c) => c.name), ...SERVICES.map((s) => s.name)]);
  const run = new Map<string, string[]>();
  for (const doc of docs.filter((d) => d.kind === 'Deployment' || d.kind === 'Job'))
    for (const c of containersOf(doc as never)) {
      const [program, command] = c.command ?? [];
      assert.equal(program, 'tidemark', `${c.name}: ${c.command?.join(' ')}`);
      assert.ok(known.has(command!), `${c.name}: "tidemark ${command}" is not a command`);
      run.set(c.name, c.command!);
      assert.deepEqual(
        c.envFrom?.map((e) => e.configMapRef?.name ?? e.secretRef?.name),
        ['tidemark', 'tidemark'],
        `${c.name} reads the ConfigMap and the Secret`,
      );
    }
  assert.deepEqual([...run.keys()].sort(), ['migrate', 'sync', 'watch', 'web', 'worker']);
  // The ConfigMap's settings pass tidemark's own configuration check.
  const config = named<{ data: Record<string, string> }>('ConfigMap', 'tidemark')!;
  assert.doesNotThrow(() => loadConfig({ ...config.data }));
});

test('the page has a way in: its settings pass the check `tidemark web` makes at start', () => {
  const config = named<{ data: Record<string, string> }>('ConfigMap', 'tidemark')!;
  const web = containersOf(named('Deployment', 'tidemark-web')!)[0]!;
  const env = { ...config.data, ...Object.fromEntries((web.env ?? []).map((e) => [e.name, e.value!])) };
  assert.doesNotThrow(() => checkSignIn(loadConfig(env)));
  // The check can fail: without the provider the page would need the shared token.
  const without: Record<string, string> = { ...env };
  delete without.TIDEMARK_OIDC_ISSUER;
  assert.throws(() => checkSignIn(loadConfig(without)), /TIDEMARK_OIDC_ISSUER/);
});

test('migrations run before the workers roll and the schedules are synced after, each a Job of its own', () => {
  const jobs = docs
    .filter((d) => d.kind === 'Job')
    .map((d) => containersOf(d as never).map((c) => c.command));
  assert.deepEqual(jobs, [[['tidemark', 'migrate']], [['tidemark', 'sync']]]);
  // No Temporal API key with a plain in-cluster address: a key turns TLS on.
  const config = named<{ data: Record<string, string> }>('ConfigMap', 'tidemark')!;
  assert.ok(!('TEMPORAL_API_KEY' in config.data));
});

test("the workers' probes ask the worker's own port and paths; the job workers and the watch poll apart", () => {
  for (const name of ['tidemark-worker', 'tidemark-watch']) {
    const [c] = containersOf(named('Deployment', name)!);
    assert.deepEqual(c!.ports, [{ name: 'probes', containerPort: 9464 }]);
    assert.equal(c!.livenessProbe?.httpGet?.path, '/healthz');
    assert.equal(c!.readinessProbe?.httpGet?.path, '/readyz');
    assert.equal(c!.readinessProbe?.httpGet?.port, 'probes');
  }
  const role = (name: string) =>
    containersOf(named('Deployment', name)!)[0]!.env?.find((e) => e.name === 'TIDEMARK_WORKER_ROLE')?.value;
  assert.equal(role('tidemark-worker'), 'jobs');
  assert.equal(role('tidemark-watch'), 'watch');
  const web = containersOf(named('Deployment', 'tidemark-web')!)[0]!;
  const env = Object.fromEntries((web.env ?? []).map((e) => [e.name, e.value]));
  assert.equal(env.TIDEMARK_WEB_HOST, '0.0.0.0');
  assert.equal(Number(env.TIDEMARK_WEB_PORT), web.ports?.[0]?.containerPort);
});
