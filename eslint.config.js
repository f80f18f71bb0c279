import js from '@eslint/js';
import tseslint from 'typescript-eslint';
import globals from 'globals';

// Import boundaries: a service imports the kit, the object model and its own folder; the object model
// imports only the kit; the kit imports nothing of the platform. The standalone composes the services.
const SERVICES = ['gateway', 'data-plane', 'control-plane', 'model-server', 'poem-app', 'image-search'];
const OUTSIDE = ['operator', 'controllers', 'standalone'];
const forbid = (folders) => ({
  'no-restricted-imports': [
    'error',
    {
      patterns: folders.map((f) => ({
        group: [`**/${f}/**`],
        message: `a service imports only the kit, the object model and its own folder (not ${f}/)`,
      })),
    },
  ],
});
const boundaries = [
  ...SERVICES.map((service) => ({
    files: [`images/${service}/**/*.ts`],
    rules: forbid([...SERVICES.filter((s) => s !== service), ...OUTSIDE]),
  })),
  { files: ['images/object-model/**/*.ts'], rules: forbid([...SERVICES, ...OUTSIDE]) },
  { files: ['images/service-kit/**/*.ts'], rules: forbid([...SERVICES, ...OUTSIDE, 'object-model']) },
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/', 'data/', 'test/artifacts/', '**/build/', 'images/*/web/vendor/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { ...globals.node } },
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      // One reason to change per file: a file that outgrows this is split by what it does.
      'max-lines': ['error', { max: 500 }],
    },
  },
  ...boundaries,
  {
    files: ['**/*.cjs'],
    languageOptions: { sourceType: 'commonjs', globals: { ...globals.node } },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    files: ['images/*/web/**/*.js', 'images/*/public/**/*.js'],
    languageOptions: { globals: { ...globals.browser } },
  },
);
