// Lint rules; the important one fences workflows/ to deterministic imports only.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', '.venv/**', '.tidemark/**', 'dist/**'] },
  ...tseslint.configs.recommended,
  {
    rules: {
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
