// Installs the project's dependencies when they are missing or older than the lockfile, so
// `npm start` and `npm test` work on a fresh clone. Plain JavaScript: it runs on whatever
// Node is on the machine (Node 22 itself is one of the dependencies it installs). The test-only
// packages only with `--tests` (npm test): starting needs none of them.
import { execSync } from 'node:child_process';
import { statSync } from 'node:fs';

const mtime = (path) => {
  try {
    return statSync(path).mtimeMs;
  } catch {
    return 0;
  }
};

if (mtime('node_modules/.package-lock.json') < mtime('package-lock.json')) {
  console.log('sluice: installing dependencies (npm install) …');
  execSync('npm install --no-audit --no-fund', { stdio: 'inherit' });
}

if (process.argv.includes('--tests')) {
  // The generated-client test's own package (test/client: openapi-typescript needs TypeScript 5).
  if (mtime('test/client/node_modules/.package-lock.json') < mtime('test/client/package-lock.json')) {
    console.log('sluice: installing the dependencies of test/client (the generated-client test) …');
    execSync('npm --prefix test/client ci --no-audit --no-fund', { stdio: 'inherit' });
  }

  // The receivers' frameworks (test/adapters: Express, Fastify and Next.js, as a user's project has them).
  if (mtime('test/adapters/node_modules/.package-lock.json') < mtime('test/adapters/package-lock.json')) {
    console.log("sluice: installing the dependencies of test/adapters (the receivers' frameworks) …");
    execSync('npm --prefix test/adapters ci --no-audit --no-fund', { stdio: 'inherit' });
  }
}
