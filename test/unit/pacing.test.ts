/** When a run claims, and how many (src/dispatcher/pacing.ts): the rules, apart from the loop. */
import { describe, expect, it } from 'vitest';
import { ClaimAhead, nextStep, type Pace } from '../../src/dispatcher/pacing.ts';

const pace = (over: Partial<Pace> = {}): Pace => ({
  parallelism: 64,
  maxClaimBatch: 100,
  maxPushes: Number.POSITIVE_INFINITY,
  claimed: 0,
  inFlight: 0,
  ready: 0,
  ahead: 0,
  perClaim: 0,
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

describe('claiming ahead', () => {
  it('holds tasks beyond the places, and claims when a round trip’s worth of room is free', () => {
    // A Worker shard with Postgres far away: its six places use 30 tasks during a claim.
    const far = { parallelism: 6, ahead: 60, perClaim: 30 };
    expect(nextStep(pace({ ...far, inFlight: 0, ready: 0 }))).toEqual({ kind: 'claim', max: 66 });
    expect(nextStep(pace({ ...far, inFlight: 6, ready: 31 }))).toEqual({ kind: 'wait' });
    expect(nextStep(pace({ ...far, inFlight: 6, ready: 30 }))).toEqual({ kind: 'claim', max: 30 });
    // Tasks waiting for a place are work in hand: not idle.
    expect(nextStep(pace({ inFlight: 0, ready: 1, freed: false, lastPassFull: false }))).toEqual({ kind: 'wait' });
    // With nothing measured yet, nothing is claimed ahead.
    expect(nextStep(pace({ parallelism: 6, inFlight: 4 }))).toEqual({ kind: 'claim', max: 2 });
  });
});

describe('ClaimAhead', () => {
  it('claims ahead what the places use during a claim’s round trip, twice over, within the batch', () => {
    const a = new ClaimAhead(6, 100);
    expect([a.perClaim, a.ahead]).toEqual([0, 0]);
    a.claimTook(2);
    expect([a.perClaim, a.ahead]).toEqual([0, 0]);
    // Near: a 2 ms claim, 4 ms pushes: six places use three tasks meanwhile.
    a.pushTook(4);
    expect([a.perClaim, a.ahead]).toEqual([3, 6]);
    // Far: 50 ms claims, 10 ms pushes: thirty; held ahead, sixty.
    const far = new ClaimAhead(6, 100);
    far.claimTook(50);
    far.pushTook(10);
    expect([far.perClaim, far.ahead]).toEqual([30, 60]);
    // Slow endpoints: a second a push, nothing worth holding beyond one.
    const slow = new ClaimAhead(6, 100);
    slow.claimTook(50);
    slow.pushTook(1_000);
    expect([slow.perClaim, slow.ahead]).toEqual([1, 2]);
    // Never more than a claim pass may take.
    const huge = new ClaimAhead(64, 100);
    huge.claimTook(50);
    huge.pushTook(1);
    expect([huge.perClaim, huge.ahead]).toEqual([100, 100]);
  });

  it('follows a change within a few samples', () => {
    const a = new ClaimAhead(6, 100);
    a.claimTook(50);
    a.pushTook(10);
    for (let i = 0; i < 20; i++) a.claimTook(2);
    expect(a.perClaim).toBe(2);
  });
});
