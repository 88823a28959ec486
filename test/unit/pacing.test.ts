/** When a run claims, and how many (src/dispatcher/pacing.ts): the rules, apart from the loop. */
import { describe, expect, it } from 'vitest';
import { nextStep, type Pace } from '../../src/dispatcher/pacing.ts';

const pace = (over: Partial<Pace> = {}): Pace => ({
  parallelism: 64,
  maxClaimBatch: 100,
  maxPushes: Number.POSITIVE_INFINITY,
  claimed: 0,
  inFlight: 0,
  settling: 0,
  background: 0,
  freed: true,
  lastPassFull: true,
  reaped: true,
  ...over,
});

describe('nextStep', () => {
  it('claims every place at the start, within the claim batch', () => {
    expect(nextStep(pace())).toEqual({ kind: 'claim', max: 64 });
    expect(nextStep(pace({ parallelism: 500 }))).toEqual({ kind: 'claim', max: 100 });
  });

  it('waits with pushes in flight until a quarter of the places are free', () => {
    expect(nextStep(pace({ inFlight: 49, freed: true }))).toEqual({ kind: 'wait' });
    expect(nextStep(pace({ inFlight: 48, freed: true }))).toEqual({ kind: 'claim', max: 16 });
    // Six places (a Worker shard): a quarter, rounded up, is two.
    expect(nextStep(pace({ parallelism: 6, inFlight: 5, freed: true }))).toEqual({ kind: 'wait' });
    expect(nextStep(pace({ parallelism: 6, inFlight: 4, freed: true }))).toEqual({ kind: 'claim', max: 2 });
    // One or two places: one.
    expect(nextStep(pace({ parallelism: 2, inFlight: 1, freed: true }))).toEqual({ kind: 'claim', max: 1 });
  });

  it('claims no more than the pushes left to it', () => {
    expect(nextStep(pace({ maxPushes: 10, claimed: 8, inFlight: 5 }))).toEqual({ kind: 'claim', max: 2 });
    expect(nextStep(pace({ maxPushes: 10, claimed: 10, inFlight: 5 }))).toEqual({ kind: 'wait' });
  });

  it('claims again after a full pass even with nothing freed, but not after a short one', () => {
    expect(nextStep(pace({ inFlight: 10, freed: false, lastPassFull: true }))).toEqual({ kind: 'claim', max: 54 });
    expect(nextStep(pace({ inFlight: 10, freed: false, lastPassFull: false }))).toEqual({ kind: 'wait' });
  });

  it('is idle only when nothing runs, nothing was freed and the first reap has ended', () => {
    const done = { inFlight: 0, freed: false, lastPassFull: false };
    expect(nextStep(pace(done))).toEqual({ kind: 'idle' });
    expect(nextStep(pace({ ...done, settling: 1 }))).toEqual({ kind: 'wait' });
    expect(nextStep(pace({ ...done, background: 1 }))).toEqual({ kind: 'wait' });
    expect(nextStep(pace({ ...done, reaped: false }))).toEqual({ kind: 'wait' });
    expect(nextStep(pace({ ...done, freed: true }))).toEqual({ kind: 'claim', max: 64 });
  });
});
