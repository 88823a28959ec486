import { defineConfig } from 'vitest/config';

// Three tiers (test/unit, test/db, test/worker) in one run. The global setup starts one
// embedded Postgres; each db or worker test file gets a database of its own from a template.
// The worker tier runs a second time with its Workers reaching Postgres through a Hyperdrive
// binding instead of Neon's driver (test/helpers/worker-fixture.ts): both Worker database paths
// are proven by every run.
export default defineConfig({
  test: {
    globalSetup: ['test/helpers/global-setup.ts'],
    // Every answer a test gets from a Sluice server is checked against /openapi.json.
    setupFiles: ['test/helpers/setup-contract.ts'],
    reporters: ['default', './test/helpers/summary-reporter.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    sequence: { hooks: 'stack' },
    projects: [
      { test: { name: 'sluice', include: ['test/**/*.test.ts'] } },
      {
        test: {
          name: 'hyperdrive',
          include: ['test/worker/**/*.test.ts'],
          // These start their own Workers on the Neon path, whatever the fixture's.
          exclude: ['test/worker/lost-answer.test.ts', 'test/worker/schema-check.test.ts'],
          env: { SLUICE_TEST_DATABASE_PATH: 'hyperdrive' },
        },
      },
    ],
  },
});
