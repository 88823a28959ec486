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
  /**
   * Opens a connection now, ahead of the first statement, where a pool can (the handshakes
   * then overlap with whatever comes before that statement); never fails.
   */
  warm?(): void;
}

/** Statement texts sent as named prepared statements, with their names (`prepared`). */
const PREPARED = new Map<string, string>();

/**
 * Marks a statement to be parsed and planned once per connection (a named prepared statement):
 * for the few that run on every push, whose planning cost more than their execution. Returns
 * the text, used as any other. Only for statements whose result columns are named, never `*`:
 * a prepared statement whose result type a migration changed fails until its connection
 * closes. Drivers without sessions (Neon's HTTP queries) send the text as it is.
 */
export function prepared(name: string, text: string): string {
  PREPARED.set(text, `sluice_${name}`);
  return text;
}

interface PgResultLike {
  rows: unknown[];
}
/** node-postgres's (and Neon's) query forms: text and values, or a config naming a prepared statement. */
type PgQuery = (query: string | { name: string; text: string; values?: unknown[] }, params?: unknown[]) => Promise<PgResultLike>;
interface PgClientLike {
  query: PgQuery;
  release(error?: Error | boolean): void;
  on(event: 'error', listener: (error: Error) => void): unknown;
  off(event: 'error', listener: (error: Error) => void): unknown;
}
/** The part of `pg.Pool` / Neon's `Pool` that Sluice uses. */
export interface PgPoolLike {
  query: PgQuery;
  connect(): Promise<PgClientLike>;
  end(): Promise<void>;
}

function run(on: { query: PgQuery }, text: string, params: readonly unknown[] | undefined, named: boolean): Promise<PgResultLike> {
  const values = params as unknown[] | undefined;
  const name = named ? PREPARED.get(text) : undefined;
  return name === undefined ? on.query(text, values) : on.query({ name, text, values });
}

/**
 * A Db over a pool. `named: false` sends every statement unnamed: for a pooler in transaction
 * mode (Hyperdrive), where a session's prepared statements are not its own to keep.
 */
export function poolDb(pool: PgPoolLike, options: { named?: boolean } = {}): OpenDb {
  const named = options.named ?? true;
  return {
    async query<R>(text: string, params?: readonly unknown[]) {
      return (await run(pool, text, params, named)).rows as R[];
    },
    async transaction<T>(fn: (tx: Queryable) => Promise<T>) {
      const client = await pool.connect();
      // A connection lost while the client is checked out is emitted on it (the pool listens
      // only to idle ones), besides failing the statement in flight: unheard, the process would
      // crash. The statement's failure is what this transaction acts on.
      const lost = () => {};
      client.on('error', lost);
      const tx: Queryable = {
        async query<R>(text: string, params?: readonly unknown[]) {
          return (await run(client, text, params, named)).rows as R[];
        },
      };
      try {
        await client.query('begin');
        const value = await fn(tx);
        await client.query('commit');
        client.off('error', lost);
        client.release();
        return value;
      } catch (error) {
        // A failed rollback means the connection is broken: drop it rather than reuse it.
        const broken = await client.query('rollback').then(
          () => false,
          () => true,
        );
        client.off('error', lost);
        client.release(broken);
        throw error;
      }
    },
    warm() {
      pool.connect().then(
        (client) => client.release(),
        () => {},
      );
    },
    close: () => pool.end(),
  };
}
