// Lint rules; the important ones fence workflows/ to deterministic imports only, and keep every
// import running down the layers.
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import tseslint from 'typescript-eslint';

const root = dirname(fileURLToPath(import.meta.url));

/**
 * The layers, lowest first. A file may import files of its own top-level folder and of the folders
 * of lower layers, never of its own layer's other folders or of a higher one: the contract knows
 * nothing of the rest, the database knows no job, workflows know activities only by their types
 * (and lint holds them to that below), the wiring in workers/ knows all that runs, the faces (web,
 * Slack) and entry points stand on that, and the `tidemark` command starts any of them.
 */
export const LAYERS = [
  ['contract'],
  ['codec', 'charts'],
  ['db'],
  ['schedules'],
  ['jobs', 'activities'],
  ['workflows'],
  ['config'],
  ['workers'],
  ['operator', 'testing'],
  ['web', 'slack'],
  ['bin'],
  ['cli'],
  ['scripts', 'chaos', 'bench'],
  ['index.ts', 'temporal.ts'],
  ['test'],
];
const layerOf = new Map(LAYERS.flatMap((names, i) => names.map((name) => [name, i])));
/** The fault suite, the benchmarks and the recording scripts run the tests' own servers (SMTP, chat, checker). */
const USES_TEST_HELPERS = new Set(['scripts', 'chaos', 'bench']);

/** The top-level folder (or root file) a path of the repository lies in. */
const topOf = (file) => relative(root, file).split(/[\\/]/)[0];

const layers = {
  meta: {
    type: 'problem',
    docs: { description: 'Imports run down the layers (LAYERS in eslint.config.js), never up or sideways.' },
    schema: [],
  },
  create(context) {
    const from = topOf(context.filename);
    const fromLayer = layerOf.get(from);
    if (fromLayer === undefined) return {};
    const check = (node, source) => {
      if (typeof source !== 'string' || !source.startsWith('.')) return;
      const target = resolve(dirname(context.filename), source);
      const to = topOf(target);
      const toLayer = layerOf.get(to.replace(/\.js$/, '.ts'));
      if (toLayer === undefined || to === from) return;
      if (USES_TEST_HELPERS.has(from) && relative(root, target).startsWith('test/helpers/')) return;
      if (toLayer < fromLayer) return;
      const where = toLayer === fromLayer ? 'beside it in the same layer' : 'in a higher layer';
      context.report({
        node,
        message: `${from}/ may not import ${to}/ (${where}: LAYERS in eslint.config.js). Move what both need down, to contract/ or the lower folder, or pass it in.`,
      });
    };
    return {
      ImportDeclaration: (node) => check(node.source, node.source.value),
      ExportNamedDeclaration: (node) => node.source && check(node.source, node.source.value),
      ExportAllDeclaration: (node) => check(node.source, node.source.value),
      ImportExpression: (node) => node.source.type === 'Literal' && check(node.source, node.source.value),
    };
  },
};

export default tseslint.config(
  { ignores: ['node_modules/**', '.venv/**', '.tidemark/**', 'dist/**', '.bench-build/**'] },
  ...tseslint.configs.recommended,
  {
    plugins: { tidemark: { rules: { layers } } },
    rules: {
      'tidemark/layers': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-restricted-syntax': [
        'error',
        { selector: 'TSEnumDeclaration', message: 'Use a frozen constants map, not enum.' },
      ],
    },
  },
  {
    // Workflow code is replayed: it may import @temporalio/workflow, @temporalio/common,
    // its own folder, the contract folder, and only *types* from anywhere else.
    files: ['workflows/**/*.ts'],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          patterns: [
            {
              regex:
                '^(?!@temporalio/(workflow|common)$|@opentelemetry/api$|@temporalio/interceptors-opentelemetry/lib/workflow/index\\.js$|\\./|\\.\\./contract/)',
              allowTypeImports: true,
              message:
                'workflows/ is deterministic: import only @temporalio/workflow, @temporalio/common, ./ files, ../contract/, types, or the tracing interceptors (workflows/tracing.ts).',
            },
          ],
        },
      ],
      'no-restricted-globals': [
        'error',
        { name: 'setTimeout', message: 'Use sleep() from @temporalio/workflow.' },
        { name: 'setInterval', message: 'Use sleep() in a loop.' },
        { name: 'process', message: 'Workflows must not read the environment.' },
      ],
    },
  },
);
