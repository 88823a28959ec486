/**
 * The embedded Postgres as other users start it: as root, from a folder only its owner can
 * enter (mode 0700, as `/root` is). Postgres will not run as root; it runs as the postgres
 * user, so what that user cannot reach moves where it can. (The whole suite, run as root from
 * such a folder, covers the binaries' side; here the data folder's.)
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { reachable, startEmbeddedPostgres } from '../../src/node/postgres.ts';

const asRoot = userInfo().uid === 0;

describe('reachable', () => {
  it('follows the traverse bits of every folder above a path, for owner, group and others', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'sluice-reach-'));
    try {
      const other = { uid: 4_000_001, gid: 4_000_001 };
      const owner = { uid: userInfo().uid, gid: 4_000_001 };
      await chmod(dir, 0o700);
      expect(await reachable(join(dir, 'pg'), other)).toBe(false);
      expect(await reachable(join(dir, 'pg'), owner)).toBe(true);
      await chmod(dir, 0o701);
      expect(await reachable(join(dir, 'pg'), other)).toBe(true);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.skipIf(!asRoot)('as root', () => {
  it('starts with its data folder inside a 0700 folder: the data moves where the postgres user can reach it', async () => {
    const home = await mkdtemp(join(tmpdir(), 'sluice-private-'));
    await chmod(home, 0o700);
    // A folder that does not exist yet, as `.sluice/pg` on a fresh clone.
    const postgres = await startEmbeddedPostgres({ dir: join(home, 'not-yet', 'pg'), persistent: false });
    try {
      expect(postgres.dataDir).not.toContain(home);
      const client = new pg.Client(postgres.url('postgres'));
      await client.connect();
      const { rows } = await client.query('select current_user');
      await client.end();
      expect(rows).toEqual([{ current_user: 'sluice' }]);
    } finally {
      await postgres.stop();
      await rm(home, { recursive: true, force: true });
    }
  });
});
