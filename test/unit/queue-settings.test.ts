/**
 * A queue setting is declared once (src/core/queue-settings.ts). What derives from the list is
 * checked here against it, and so is what cannot derive from it: the claim statement's reading of
 * each claim-time setting and its default (migrations/functions/claim.sql), the enqueue's reading
 * of each enqueue-time one (src/db/key-strategy.ts), the describe view's fields, and the CLI's flags.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { queue as queueAnswer } from '../../src/api/answers.ts';
import { SETTING_FIELDS } from '../../src/cli/commands/queues.ts';
import { loadConfig } from '../../src/config.ts';
import { resolveQueueLimits } from '../../src/core/limits.ts';
import {
  CLAIM_SETTING_NAMES,
  QUEUE_SETTING_NAMES,
  QUEUE_SETTINGS,
  queueLimitsSchema,
  queueSettingsPatchSchema,
} from '../../src/core/queue-settings.ts';
import { makeSecrets, testEnv } from '../helpers/config.ts';

const CLAIM_SQL = await readFile(new URL('../../migrations/functions/claim.sql', import.meta.url), 'utf8');
const ENQUEUE_SQL = await readFile(new URL('../../src/db/key-strategy.ts', import.meta.url), 'utf8');
const ENQUEUE_SETTING_NAMES = QUEUE_SETTING_NAMES.filter((n) => QUEUE_SETTINGS[n].readBy === 'enqueue');

/** A value of each setting, unlike its default. */
const SAMPLE = {
  concurrency: 3,
  key_concurrency: 2,
  priority: -4,
  paused: true,
  rate: { limit: 5, period_ms: 1_000 },
  key_rate: { limit: 2, period_ms: 500, burst: 4 },
  adaptive: true,
  adaptive_min: 2,
  pull: true,
  key_strategy: 'cancel_newest',
} satisfies Record<(typeof QUEUE_SETTING_NAMES)[number], unknown>;

describe('the queue settings, declared once', () => {
  it('give SLUICE_QUEUES and the run-time patch the same fields', () => {
    expect(Object.keys(queueLimitsSchema.shape).sort()).toEqual([...QUEUE_SETTING_NAMES].sort());
    expect(Object.keys(queueSettingsPatchSchema.shape).sort()).toEqual([...QUEUE_SETTING_NAMES].sort());
    expect(queueLimitsSchema.parse(SAMPLE)).toEqual(SAMPLE);
    expect(queueSettingsPatchSchema.parse(Object.fromEntries(QUEUE_SETTING_NAMES.map((n) => [n, null])))).toBeTruthy();
  });

  it('reach the claim as JSON: every claim-time setting, and nothing of the queue that is not one', async () => {
    const secrets = await makeSecrets();
    const config = loadConfig(
      testEnv(secrets, 'postgres://localhost/x', { SLUICE_QUEUES: JSON.stringify({ q: { ...SAMPLE, key_from: 'id', max_attempts: 3 } }) }),
    );
    const claimTime = Object.fromEntries(CLAIM_SETTING_NAMES.map((n) => [n, SAMPLE[n]]));
    expect(JSON.parse(config.claimQueuesJson)).toEqual({ q: claimTime });
    expect(ENQUEUE_SETTING_NAMES).toEqual(['key_strategy']);
    expect([...CLAIM_SETTING_NAMES, ...ENQUEUE_SETTING_NAMES].sort()).toEqual([...QUEUE_SETTING_NAMES].sort());
  });

  it('each has its default when nothing sets it, and an override wins over the environment', () => {
    const none = resolveQueueLimits(undefined, null);
    const byName = {
      concurrency: none.concurrency,
      key_concurrency: none.keyConcurrency,
      priority: none.priority,
      paused: none.paused,
      rate: none.rate,
      key_rate: none.keyRate,
      adaptive: none.adaptive,
      adaptive_min: none.adaptiveMin,
      pull: none.pull,
      key_strategy: none.keyStrategy,
    };
    for (const name of QUEUE_SETTING_NAMES) expect(byName[name], name).toEqual({ value: QUEUE_SETTINGS[name].fallback, source: 'default' });
    expect(resolveQueueLimits({ concurrency: 2 }, { concurrency: 7 }).concurrency).toEqual({ value: 7, source: 'override' });
  });

  it('are each read by the enqueue from the override, then the environment, with the same default', () => {
    for (const name of ENQUEUE_SETTING_NAMES) {
      const line = ENQUEUE_SQL.split('\n').find((l) => l.includes(`q.options ->> '${name}'`));
      expect(line, `key-strategy.ts reads ${name}`).toBeDefined();
      expect(line).toContain(
        `coalesce(q.options ->> '${name}', e.env, ${JSON.stringify(QUEUE_SETTINGS[name].fallback).replaceAll('"', "'")}) as ${name}`,
      );
    }
  });

  it('are each read by the claim from the override, then the environment, with the same default', () => {
    for (const name of CLAIM_SETTING_NAMES) {
      if (name === 'paused') {
        // Pausing has a column of its own (tri-state), so a pause outlives a reset of the options.
        expect(CLAIM_SQL).toContain("coalesce(q.paused, (p_queues -> d.queue ->> 'paused')::boolean, false) as paused");
        continue;
      }
      const line = CLAIM_SQL.split('\n').find((l) => l.includes('q.options ->') && new RegExp(`\\) as ${name},?$`).test(l.trim()));
      expect(line, `claim.sql reads ${name}`).toBeDefined();
      expect(line).toMatch(new RegExp(`q\\.options ->>? '${name}'.*p_queues -> d\\.queue ->>? '${name}'`));
      const fallback = /'\)(?:::\w+)?, (false|true|-?\d+)\) as /.exec(line!)?.[1] ?? null;
      expect(fallback === null ? null : JSON.parse(fallback), `claim.sql's default for ${name}`).toEqual(QUEUE_SETTINGS[name].fallback);
    }
  });

  it('are each shown by the describe view and set by `sluice queues set`', () => {
    for (const name of QUEUE_SETTING_NAMES) expect(queueAnswer.shape, name).toHaveProperty(name);
    expect([...SETTING_FIELDS].sort()).toEqual([...QUEUE_SETTING_NAMES].filter((n) => n !== 'paused').sort());
  });
});
