import { describe, expect, it } from 'vitest';
import { isNotStarted, isTransientDbError } from '../../src/db/faults.ts';
import { withDbRetry } from '../../src/dispatcher/retry-db.ts';

const fault = (code: string, message = code) => Object.assign(new Error(message), { code });

describe('withDbRetry', () => {
  it('retries a transient fault, then returns', async () => {
    let calls = 0;
    const value = await withDbRetry(
      async () => {
        if (++calls < 3) throw fault('ECONNRESET');
        return 'ok';
      },
      { baseMs: 1 },
    );
    expect({ value, calls }).toEqual({ value: 'ok', calls: 3 });
  });

  it('does not retry a call that must not run twice after a fault that may have committed', async () => {
    let calls = 0;
    const attempt = withDbRetry(
      async () => {
        calls++;
        throw fault('ECONNRESET');
      },
      { idempotent: false, baseMs: 1 },
    );
    await expect(attempt).rejects.toThrow('ECONNRESET');
    expect(calls).toBe(1);
  });

  it('gives up after the last attempt, and never retries a real error', async () => {
    let calls = 0;
    const deadlock = async () => {
      calls++;
      throw fault('40P01');
    };
    await expect(withDbRetry(deadlock, { attempts: 3, baseMs: 1 })).rejects.toThrow();
    expect(calls).toBe(3);
    await expect(withDbRetry(async () => Promise.reject(fault('23505', 'duplicate key')))).rejects.toThrow('duplicate key');
  });

  it('classifies faults', () => {
    expect(isTransientDbError(fault('08006'))).toBe(true);
    expect(isTransientDbError(fault('57P01'))).toBe(true);
    expect(isTransientDbError(new Error('Connection terminated unexpectedly'))).toBe(true);
    expect(isTransientDbError(fault('42P01'))).toBe(false);
    // No connection within the pool's connect timeout: nothing was sent, so even a claim may retry.
    expect(isNotStarted(new Error('Connection terminated due to connection timeout'))).toBe(true);
    expect(isNotStarted(new Error('timeout exceeded when trying to connect'))).toBe(true);
    // The Neon driver's HTTP path, its endpoint unreachable.
    expect(isTransientDbError(new Error('Error connecting to database: fetch failed'))).toBe(true);
    expect(isNotStarted(fault('40001'))).toBe(true);
    expect(isNotStarted(fault('08006'))).toBe(false);
  });
});
