/** The OpenAPI document passes @redocly/cli lint (its recommended rules): no error, no warning. */
import { execFile } from 'node:child_process';
import { mkdir, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { expect, it } from 'vitest';
import { openApiDocument } from '../../src/api/openapi/document.ts';
import { requireInstalled } from '../client/installed.ts';
import { ROOT } from '../helpers/process.ts';

const run = promisify(execFile);
const TOOLS = `${ROOT}test/client`;

it('passes redocly lint with no error and no warning (five accepted, each said why)', async () => {
  requireInstalled();
  await mkdir(`${TOOLS}/generated`, { recursive: true });
  await writeFile(`${TOOLS}/generated/openapi.json`, JSON.stringify(openApiDocument(), null, 2));
  // Errors make the linter exit non-zero; the report on stdout is read either way.
  const { stdout } = await run(`${TOOLS}/node_modules/.bin/redocly`, ['lint', 'generated/openapi.json', '--format=json'], {
    cwd: TOOLS,
    env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
  }).catch((error: { stdout: string }) => error);
  const report = JSON.parse(stdout) as { totals: Record<string, number>; problems: unknown[] };
  expect(report.problems).toEqual([]);
  expect(report.totals).toEqual({ errors: 0, warnings: 0, ignored: 5 });
}, 60_000);
