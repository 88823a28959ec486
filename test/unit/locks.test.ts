/** Every advisory lock id written in the source or the SQL is one of src/db/locks.ts, each used for one thing. */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ADVISORY_LOCKS } from '../../src/db/locks.ts';

const ROOT = new URL('../../', import.meta.url).pathname;

async function filesUnder(dir: string, ext: RegExp): Promise<string[]> {
  const entries = await readdir(join(ROOT, dir), { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && ext.test(e.name)).map((e) => join(e.parentPath, e.name));
}

describe('advisory locks', () => {
  it('have distinct ids, listed in one module', () => {
    const ids = Object.values(ADVISORY_LOCKS);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('are taken in the code and the function files only by an id of that list', async () => {
    const files = [...(await filesUnder('src', /\.ts$/)), ...(await filesUnder('migrations/functions', /\.sql$/))];
    const known = new Set<number>(Object.values(ADVISORY_LOCKS));
    const seen = new Map<number, string[]>();
    for (const file of files) {
      if (file.endsWith('src/db/locks.ts')) continue;
      for (const m of (await readFile(file, 'utf8')).matchAll(/pg_(?:try_)?advisory_xact_lock\((\d[\d_]*)\)/g)) {
        const id = Number(m[1]!.replaceAll('_', ''));
        expect(known.has(id), `${file} takes lock ${id}, not in src/db/locks.ts`).toBe(true);
        seen.set(id, [...(seen.get(id) ?? []), file]);
      }
    }
    // The claim's lock and the sweep's are in SQL; the others go through the constant.
    expect([...seen.keys()].sort()).toEqual([ADVISORY_LOCKS.claim, ADVISORY_LOCKS.historySweep].sort());
    for (const [id, where] of seen) expect(where, `lock ${id} is taken in one file`).toHaveLength(1);
  });
});
