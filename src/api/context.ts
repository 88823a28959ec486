/** What every request handler can reach: the config, the database, and the dispatcher kick. */
import type { Config, Env } from '../config.ts';
import type { Db, OpenDb } from '../db/db.ts';
import type { Keyring } from '../security/keyring.ts';

export interface ExecutionContextLike {
  waitUntil(promise: Promise<unknown>): void;
}

/** How the app reaches what differs between Workers and a long-lived server. */
export interface Platform {
  /** A database handle for one request; closed when the request is done. */
  openDb(config: Config): OpenDb;
  /** Starts dispatching soon, without delaying the response. */
  kick(config: Config, env: Env, ctx: ExecutionContextLike): void;
}

export interface AppEnv {
  Bindings: Env;
  Variables: {
    config: Config;
    db: Db;
    keyring: () => Promise<Keyring>;
    kick: () => void;
  };
}
