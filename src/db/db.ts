/**
 * The database seam. Everything else talks to Postgres through `Db`; the only SQL lives in
 * this folder (and in `migrations/`). One adapter serves both drivers, because the Neon
 * driver's Pool (Workers) and node-postgres's Pool (Node) share an interface.
 */

export interface Queryable {
  query<R = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<R[]>;
}

export interface Db extends Queryable {
  /** Runs `fn` in one transaction on one connection: COMMIT on return, ROLLBACK on throw. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
}

/** A Db that must be closed when the invocation that opened it ends. */
export interface OpenDb extends Db {
  close(): Promise<void>;
}

interface PgResultLike {
  rows: unknown[];
}
interface PgClientLike {
  query(text: string, params?: unknown[]): Promise<PgResultLike>;
  release(error?: Error | boolean): void;
}
/** The part of `pg.Pool` / Neon's `Pool` that Sluice uses. */
export interface PgPoolLike {
  query(text: string, params?: unknown[]): Promise<PgResultLike>;
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
}

export function poolDb(pool: PgPoolLike): OpenDb {
  return {
    async query<R>(text: string, params?: readonly unknown[]) {
      const result = await pool.query(text, params as unknown[] | undefined);
      return result.rows as R[];
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      const client = await pool.connect();
      const tx: Queryable = {
        async query<R>(text: string, params?: readonly unknown[]) {
          return (await client.query(text, params as unknown[] | undefined)).rows as R[];
        },
      };
      try {
        await client.query('begin');
        const value = await fn(tx);
        await client.query('commit');
        client.release();
        return value;
      } catch (error) {
        // A failed rollback means the connection is broken: drop it rather than reuse it.
        const broken = await client.query('rollback').then(
          () => false,
          () => true,
        );
        client.release(broken);
        throw error;
      }
    },
    close: () => pool.end(),
  };
}
