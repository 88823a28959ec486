/**
 * The SDK as a user gets it: `npm run sdk:pack` builds and packs it, and the tarball is
 * installed into fresh Node, Bun, Deno and Worker projects outside the repository (the
 * receiver in test/runtimes/sdk-package/). Each project receives a real signed push from a
 * running Sluice (the Node server on real Postgres) and answers 2xx, so the task succeeds; a
 * push altered on its way and a push signed with another key are both refused.
 */
import { execFile } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer, request as forward, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../src/node/postgres.ts';
import { type NodeSluice, startNodeSluice } from '../../src/node/server.ts';
import { signPush } from '../../src/protocol/signature.ts';
import { HEADERS, SluiceClient } from '../../src/sdk/index.ts';
import { generateSigningJwk, loadKeyring } from '../../src/security/keyring.ts';
import { makeSecrets, type TestSecrets, testEnv } from '../helpers/config.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/db.ts';
import { BIN, ROOT, spawnReady } from '../helpers/process.ts';
import { startUserWorker } from '../helpers/user-worker.ts';

const run = promisify(execFile);
const FIXTURES = `${ROOT}test/runtimes/sdk-package`;
const manifest = JSON.parse(await readFile(`${ROOT}src/sdk/package.json`, 'utf8')) as {
  name: string;
  version: string;
  exports: Record<string, Record<string, string> | string>;
  dependencies: Record<string, string>;
};
/** npm's name for the tarball: `@sluice/sdk` 0.1.0 → `sluice-sdk-0.1.0.tgz`. */
const TARBALL = `${manifest.name.replace(/^@/, '').replace('/', '-')}-${manifest.version}.tgz`;

const RUNTIMES = ['node', 'bun', 'deno', 'workerd'] as const;
type Runtime = (typeof RUNTIMES)[number];
/** What each runtime calls itself in `navigator.userAgent`, which the receiver reports. */
const USER_AGENT: Record<Runtime, RegExp> = {
  node: /^Node\.js\/\d+$/,
  bun: /^Bun\//,
  deno: /^Deno\//,
  workerd: /^Cloudflare-Workers$/,
};

let work: string;
let t: TestDatabase;
let secrets: TestSecrets;
let sluice: NodeSluice;
let client: SluiceClient;
let proxy: { url: string; close(): Promise<void> };
const receivers = {} as Record<Runtime, string>;
const stops: Array<() => Promise<unknown>> = [];

beforeAll(async () => {
  work = await mkdtemp(join(tmpdir(), 'sluice-sdk-'));
  [t, secrets] = await Promise.all([createTestDatabase(), makeSecrets(), packSdk()]);
  await Promise.all(RUNTIMES.map((runtime) => createProject(runtime)));
  sluice = await startNodeSluice({ env: testEnv(secrets, t.url) });
  client = new SluiceClient({ baseUrl: sluice.url, apiKey: secrets.apiKey });
  await Promise.all(RUNTIMES.map(async (runtime) => (receivers[runtime] = await START[runtime](join(work, runtime)))));
  proxy = await startTamperingProxy();
}, 120_000);
afterAll(async () => {
  await Promise.allSettled(stops.map((stop) => stop()));
  await proxy?.close();
  await sluice?.close();
  await t?.drop();
  if (work) await rm(work, { recursive: true, force: true });
});

/** The repository's own script builds the package and packs it; the tarball is all a user gets. */
async function packSdk(): Promise<void> {
  await run('npm', ['run', 'sdk:pack'], { cwd: ROOT });
  await copyFile(`${ROOT}build/${TARBALL}`, join(work, TARBALL));
}

/** A project of its own in `work/<runtime>`: the receiver, and the SDK installed from the tarball. */
async function createProject(runtime: Runtime): Promise<void> {
  const dir = join(work, runtime);
  await mkdir(dir);
  const entry = runtime === 'workerd' ? 'worker.js' : `${runtime}.js`;
  await Promise.all([
    copyFile(`${FIXTURES}/receiver.js`, join(dir, 'receiver.js')),
    copyFile(`${FIXTURES}/${entry}`, join(dir, entry)),
    writeJson(join(dir, 'package.json'), {
      name: `receiver-${runtime}`,
      private: true,
      type: 'module',
      dependencies: { [manifest.name]: `file:../${TARBALL}` },
    }),
  ]);
  // Deno reads a package.json and the node_modules npm installed, as Bun and Node do.
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund'], { cwd: dir });
}

async function writeJson(path: string, value: unknown): Promise<void> {
  await writeFile(path, `${JSON.stringify(value, null, 2)}\n`);
}

/** Starts a project's receiver; resolves with its base URL. */
const START: Record<Runtime, (dir: string) => Promise<string>> = {
  node: (dir) => spawnReceiver(process.execPath, [join(dir, 'node.js')]),
  bun: (dir) => spawnReceiver(`${BIN}/bun`, [join(dir, 'bun.js')]),
  deno: (dir) => spawnReceiver(`${BIN}/deno`, ['run', '--allow-net', '--allow-env', '--allow-read', join(dir, 'deno.js')]),
  workerd: startWorker,
};

/**
 * Each program imports the SDK by name, resolved from its own project's node_modules: Node, Bun
 * and Deno resolve from the importing file's folder, not from the working directory (spawnReady
 * starts every process from the repository's root).
 */
async function spawnReceiver(command: string, args: string[]): Promise<string> {
  const port = await freePort();
  const child = await spawnReady(command, args, { SLUICE_URL: sluice.url, PORT: String(port) }, 'listening on');
  stops.push(async () => child.kill('SIGKILL'));
  return `http://127.0.0.1:${port}`;
}

/** Bundled as wrangler bundles it, from the project's own node_modules, and run in workerd. */
async function startWorker(dir: string): Promise<string> {
  const worker = await startUserWorker({ entry: 'worker.js', dir, bindings: { SLUICE_URL: sluice.url } });
  stops.push(() => worker.close());
  return worker.url;
}

/**
 * A man in the middle: forwards each request to the receiver its first path segment names,
 * keeping the Host header (so the receiver sees the URL Sluice signed), with `genuine` in the
 * body changed to `forged!` (same length, so the framing still holds).
 */
async function startTamperingProxy(): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.from(Buffer.concat(chunks).toString().replace('genuine', 'forged!'));
    const target = new URL(receivers[req.url!.split('/')[1] as Runtime]);
    const onward = forward(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      },
    );
    onward.on('error', (error) => res.writeHead(502).end(error.message));
    onward.end(body);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

interface TaskRow {
  status: string;
  attempts: number;
  result: string | null;
  last_status: number | null;
  last_error: string | null;
}

/** The task's row once it has finished, read from the database. */
async function finished(id: string, timeoutMs = 20_000): Promise<TaskRow> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const [row] = await t.db.query<TaskRow>(
      'select status, attempts, result, last_status, last_error from sluice.all_tasks where id = $1',
      [id],
    );
    if (row && !['pending', 'leased'].includes(row.status)) return row;
    if (Date.now() > end) throw new Error(`task ${id} still ${row?.status}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Every file below `dir`, relative to it. */
async function filesIn(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

describe('the packed SDK', () => {
  it('holds ESM JavaScript with declarations and its licence, importing nothing but its own files and dependencies', async () => {
    const installed = join(work, 'node/node_modules', manifest.name);
    const files = await filesIn(installed);
    expect(files).toContain('README.md');
    expect(files).toContain('dist/sdk/index.js');
    // The wire protocol the SDK shares with the server is built beside it (src/protocol).
    expect(files).toContain('dist/protocol/signature.js');
    expect(files).toContain('LICENSE');
    expect(await readFile(join(installed, 'LICENSE'), 'utf8')).toMatch(/^MIT License\n\nCopyright \(c\) 2026 the Sluice authors\n/);
    for (const file of files) expect(file).toMatch(/^(package\.json|README\.md|LICENSE|dist\/[\w/-]+\.(js|d\.ts))$/);
    // TypeScript reads the first condition that matches: `types` must come before `import`;
    // `default` serves require() (and any other condition).
    expect(manifest.exports['.']).toEqual({
      types: './dist/sdk/index.d.ts',
      import: './dist/sdk/index.js',
      default: './dist/sdk/index.js',
    });
    // Ranges, so a project's own jose or @noble/hashes of the same major is shared, not doubled.
    for (const range of Object.values(manifest.dependencies)) expect(range).toMatch(/^\^\d+\.\d+\.\d+$/);
    const modules = files.filter((f) => f.endsWith('.js'));
    for (const js of modules) expect(files).toContain(js.replace(/\.js$/, '.d.ts'));

    const allowed = Object.keys(manifest.dependencies);
    for (const file of files.filter((f) => f.startsWith('dist/'))) {
      const text = await readFile(join(installed, file), 'utf8');
      for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*'([^']+)'/g)) {
        // Declarations keep the source's `.ts` in their imports; TypeScript resolves those to the `.d.ts`.
        if (specifier!.startsWith('.'))
          expect(modules, `${file} imports ${specifier}`).toContain(join(file, '..', specifier!.replace(/\.ts$/, '.js')));
        else expect(allowed, `${file} imports ${specifier}`).toContain(specifier!.replace(/^(@[^/]+\/[^/]+|[^@/][^/]*).*$/, '$1'));
      }
    }
  });

  it('loads with require() from CommonJS on Node 22', async () => {
    const script =
      "const sdk = require('@sluice/sdk'); console.log(process.versions.node, typeof sdk.createHandler, typeof sdk.SluiceClient)";
    const { stdout } = await run(`${BIN}/node`, ['--input-type=commonjs', '-e', script], { cwd: join(work, 'node') });
    const [version, ...kinds] = stdout.trim().split(' ');
    expect(version).toMatch(/^22\./);
    expect(kinds).toEqual(['function', 'function']);
  });

  it('type-checks a program that uses it, resolved as Node and as a bundler resolve it', async () => {
    const options = { target: 'ES2023', lib: ['ES2024', 'DOM'], types: [], strict: true, noEmit: true, allowJs: true, checkJs: true };
    await writeJson(join(work, 'node/tsconfig.json'), { compilerOptions: { ...options, module: 'nodenext' }, files: ['receiver.js'] });
    await writeJson(join(work, 'workerd/tsconfig.json'), {
      compilerOptions: { ...options, module: 'esnext', moduleResolution: 'bundler' },
      files: ['worker.js'],
    });
    for (const project of ['node', 'workerd']) {
      const { stdout } = await run(`${BIN}/tsc`, ['-p', join(work, project, 'tsconfig.json')]).catch((error: { stdout: string }) => error);
      expect(stdout).toBe('');
    }
  });
});

describe.each(RUNTIMES)('a fresh %s project with the SDK installed', (runtime) => {
  it('verifies a real push from Sluice and answers 2xx: the task succeeds', async () => {
    const task = await client.enqueue({ url: `${receivers[runtime]}/hook`, body: { sent: 'genuine' } });
    const row = await finished(task.id);
    expect(row).toMatchObject({ status: 'succeeded', attempts: 1, last_status: 200 });
    const result = JSON.parse(row.result!) as { runtime: string };
    expect(result).toEqual({ verified: task.id, attempt: 1, body: { sent: 'genuine' }, runtime: expect.any(String) });
    expect(result.runtime).toMatch(USER_AGENT[runtime]);
  });

  it('refuses a push whose body was altered on its way: the task ends dead with its 401', async () => {
    const task = await client.enqueue({ url: `${proxy.url}/${runtime}/hook`, body: { sent: 'genuine' }, max_attempts: 1 });
    const row = await finished(task.id);
    expect(row).toMatchObject({ status: 'dead', attempts: 1, result: null, last_status: 401 });
    expect(row.last_error).toContain('push refused (body)');
  });

  it('refuses a push signed with a key that is not Sluice’s, even under Sluice’s key id', async () => {
    const impostor = await loadKeyring({ keys: [await generateSigningJwk('EdDSA', secrets.signingJwk.kid)] });
    const url = `${receivers[runtime]}/hook`;
    const body = new TextEncoder().encode('{"sent":"forged"}');
    const token = await signPush({
      key: impostor.active,
      issuer: 'sluice',
      taskId: '1',
      leaseId: crypto.randomUUID(),
      url,
      body,
      nowMs: Date.now(),
    });
    const answer = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', [HEADERS.signature]: token, [HEADERS.taskId]: '1', [HEADERS.attempt]: '1' },
      body,
    });
    expect(answer.status).toBe(401);
    expect(await answer.text()).toContain('push refused (signature)');
  });
});
