import { defineConfig } from 'vitest/config';

// Three tiers (test/unit, test/db, test/worker) in one run. The global setup starts one
// embedded Postgres; each db or worker test file gets a database of its own from a template.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Every answer a test gets from a Sluice server is checked against /openapi.json.
    setupFiles: ['test/helpers/setup-contract.ts'],
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    sequence: { hooks: 'stack' },
  },
});
