/**
 * The bare signed-push loop's process (bare-push.ts forks it, as Sluice's push runs in a process
 * of its own): the jobs it is sent, each POSTed as JSON to `argv[2]`, `argv[3]` at a time, the body
 * signed with Ed25519 by node:crypto (synchronously, as Sluice's Node push signs) and sent with
 * node:http over kept-alive connections (as its pinned fetch does). No database, no lease, no claim:
 * what a signed push costs at the least on this machine.
 */
import { generateKeyPairSync, sign } from 'node:crypto';
import http from 'node:http';
import type { BenchJob } from './contender.ts';

const url = process.argv[2] as string;
const inFlight = Number(process.argv[3]);
const { privateKey } = generateKeyPairSync('ed25519');
// As Sluice's pinned fetch: one kept-alive agent, no cap on sockets (the loops bound what is in flight).
const agent = new http.Agent({ keepAlive: true });

function push(job: BenchJob): Promise<void> {
  const body = Buffer.from(JSON.stringify(job));
  const headers = {
    'content-type': 'application/json',
    'content-length': String(body.byteLength),
    'sluice-signature': sign(null, body, privateKey).toString('base64url'),
  };
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers, agent }, (res) => {
      res.on('end', resolve).on('error', reject).resume();
    });
    request.on('error', reject);
    request.end(body);
  });
}

let jobs: BenchJob[] = [];
process.on('message', (message: { jobs: BenchJob[] } | 'go') => {
  if (message !== 'go') {
    jobs = message.jobs;
    return;
  }
  let next = 0;
  const loop = async () => {
    for (let i = next++; i < jobs.length; i = next++) await push(jobs[i] as BenchJob);
  };
  Promise.all(Array.from({ length: inFlight }, loop)).catch((error: unknown) => {
    console.error(`[bare push] ${String(error)}`);
    process.exit(1);
  });
});
process.send?.('ready');
