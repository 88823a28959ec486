/**
 * A client a user would write: generated from /openapi.json by openapi-typescript, called
 * through openapi-fetch, using every operation and reading typed fields of every answer. The
 * test (test/worker/generated-client.test.ts) compiles it with no type error allowed, then runs
 * it. Its types are generated at test time, so Sluice's own typecheck leaves this folder out.
 */
import createClient from 'openapi-fetch';
import type { paths } from './generated/schema.ts';
import type { Push, Setup } from './setup.ts';

function check(condition: unknown, what: string): asserts condition {
  if (!condition) throw new Error(`generated client: ${what}`);
}

/** Calls every operation once or more; returns the operation ids it called. */
export async function everyOperation(s: Setup): Promise<string[]> {
  const called: string[] = [];
  const as = (key: string) => createClient<paths>({ baseUrl: s.baseUrl, headers: { authorization: `Bearer ${key}` } });
  const admin = as(s.adminKey);
  const writer = as(s.writeKey);
  const done = (id: string) => called.push(id);
  const queue = 'client';

  const health = await writer.GET('/healthz');
  check(health.response.status === 200, 'healthz');
  done('getHealth');
  const jwks = await writer.GET('/.well-known/jwks.json');
  check(jwks.data?.keys.length, 'jwks');
  done('getJwks');
  const forwardJwks = await writer.GET('/.well-known/forward-jwks.json');
  const kids = (set: { keys: object[] } | undefined) => (set?.keys ?? []).map((k) => (k as { kid?: string }).kid);
  check(kids(forwardJwks.data).length > 0 && !kids(forwardJwks.data).some((kid) => kids(jwks.data).includes(kid)), 'forward jwks');
  done('getForwardJwks');
  const doc = await writer.GET('/openapi.json');
  check(doc.data?.openapi === '3.1.0', 'openapi.json');
  done('getOpenApi');
  const docs = await writer.GET('/docs', { parseAs: 'text' });
  check(typeof docs.data === 'string' && docs.data.includes('<'), 'docs');
  done('getDocs');

  const one = await writer.POST('/v1/tasks', { body: { queue, url: `${s.endpointUrl}/one`, body: { n: 1 } } });
  check(one.response.status === 201 && one.data && 'deduplicated' in one.data && !one.data.deduplicated, 'enqueue');
  done('enqueueTask');
  const batch = await writer.POST('/v1/tasks/batch', {
    body: {
      tasks: [
        { queue, url: `${s.endpointUrl}/two` },
        { queue, url: `${s.endpointUrl}/three`, concurrency_key: 'k' },
      ],
    },
  });
  check(batch.data?.tasks.length === 2, 'batch');
  done('enqueueTasks');

  // First push: heartbeat, then complete.
  const first = await s.nextPush();
  const leaseAs = (p: Push) => createClient<paths>({ baseUrl: s.baseUrl, headers: { authorization: `Bearer ${p.token}` } });
  const params = (p: Push) => ({ params: { path: { lease_id: p.leaseId } } });
  const beat = await leaseAs(first).POST('/v1/leases/{lease_id}/heartbeat', { ...params(first), body: { extend_ms: 30_000 } });
  check(beat.data && Date.parse(beat.data.expires_at) > Date.now(), 'heartbeat');
  done('heartbeatLease');
  const completed = await leaseAs(first).POST('/v1/leases/{lease_id}/complete', { ...params(first), body: { result: { ok: true } } });
  check(completed.data?.status === 'succeeded', 'complete');
  done('completeLease');

  // Second: fail for good (dead), then redrive it; third: release.
  const second = await s.nextPush();
  const failed = await leaseAs(second).POST('/v1/leases/{lease_id}/fail', { ...params(second), body: { error: 'no', retry: false } });
  check(failed.data?.status === 'dead', 'fail');
  done('failLease');
  const redriven = await writer.POST('/v1/tasks/{id}/retry', { params: { path: { id: second.taskId } } });
  check(redriven.data?.status === 'pending', 'retry');
  done('retryTask');
  const third = await s.nextPush();
  const released = await leaseAs(third).POST('/v1/leases/{lease_id}/release', { ...params(third), body: { delay_ms: 3_600_000 } });
  check(released.data?.status === 'pending', 'release');
  done('releaseLease');

  const got = await writer.GET('/v1/tasks/{id}', { params: { path: { id: first.taskId } } });
  check(got.data?.status === 'succeeded' && got.data.attempt_history[0]?.outcome === 'succeeded', 'get');
  done('getTask');
  const listed = await writer.GET('/v1/tasks', { params: { query: { queue, limit: 2 } } });
  check(listed.data?.tasks.length === 2 && listed.data.next_cursor !== null, 'list');
  done('listTasks');
  const cancelled = await writer.POST('/v1/tasks/{id}/cancel', { params: { path: { id: third.taskId } } });
  check(cancelled.data?.status === 'cancelled', 'cancel');
  done('cancelTask');

  // Queues, limits and slots (a fourth push holds a lease the admin releases).
  const path = { params: { path: { queue } } };
  const queues = await writer.GET('/v1/queues');
  check(
    queues.data?.queues.some((q) => q.name === queue),
    'list queues',
  );
  done('listQueues');
  const updated = await admin.PUT('/v1/queues/{queue}', { ...path, body: { concurrency: 5 } });
  check(updated.data?.concurrency.value === 5 && updated.data.concurrency.source === 'override', 'update queue');
  done('updateQueue');
  const shown = await writer.GET('/v1/queues/{queue}', path);
  check(shown.data?.counts.pending !== undefined, 'get queue');
  done('getQueue');
  const keyed = await admin.PUT('/v1/queues/{queue}/keys/{key}', { params: { path: { queue, key: 'k' } }, body: { limit: 2 } });
  check(keyed.data?.limit === 2, 'set key limit');
  done('setKeyLimit');
  await writer.POST('/v1/tasks', { body: { queue, url: `${s.endpointUrl}/held` } });
  const held = await s.nextPush();
  const slots = await writer.GET('/v1/queues/{queue}/concurrency', path);
  const holders = [...(slots.data?.keyless.slots ?? []), ...(slots.data?.keys.flatMap((k) => k.slots) ?? [])];
  check(slots.data && slots.data.queue_level.active >= 1 && holders.some((h) => h.lease_id === held.leaseId), 'concurrency');
  done('getQueueConcurrency');
  const forced = await admin.POST('/v1/queues/{queue}/leases/{lease_id}/release', {
    params: { path: { queue, lease_id: held.leaseId } },
  });
  check(forced.data?.released && forced.data.task_id === held.taskId, 'force release');
  done('forceReleaseLease');
  const unkeyed = await admin.DELETE('/v1/queues/{queue}/keys/{key}', { params: { path: { queue, key: 'k' } } });
  check(unkeyed.response.status === 204, 'delete key limit');
  done('deleteKeyLimit');
  const paused = await admin.POST('/v1/queues/{queue}/pause', path);
  check(paused.data?.paused.value === true, 'pause');
  done('pauseQueue');
  const resumed = await admin.POST('/v1/queues/{queue}/resume', path);
  check(resumed.data?.paused.value === false, 'resume');
  done('resumeQueue');
  const reset = await admin.DELETE('/v1/queues/{queue}', path);
  check(reset.data?.concurrency.source !== 'override', 'reset queue');
  done('resetQueue');

  // Schedules: created paused, and paused again after the resume, so no firing adds a push.
  const named = { params: { path: { name: 'client-nightly' } } };
  const scheduled = await writer.POST('/v1/schedules', {
    body: {
      name: 'client-nightly',
      cron: '0 3 * * *',
      timezone: 'Europe/Berlin',
      paused: true,
      task: { queue, url: `${s.endpointUrl}/nightly` },
    },
  });
  check(scheduled.response.status === 201 && scheduled.data?.next_fire_at === null, 'create schedule');
  done('createSchedule');
  const schedules = await writer.GET('/v1/schedules', { params: { query: { limit: 10 } } });
  check(
    schedules.data?.schedules.some((x) => x.name === 'client-nightly'),
    'list schedules',
  );
  done('listSchedules');
  const restarted = await writer.POST('/v1/schedules/{name}/resume', named);
  check(restarted.data?.paused === false && restarted.data.next_fire_at !== null, 'resume schedule');
  done('resumeSchedule');
  const stopped = await writer.POST('/v1/schedules/{name}/pause', named);
  check(stopped.data?.paused === true, 'pause schedule');
  done('pauseSchedule');
  const nightly = await writer.GET('/v1/schedules/{name}', named);
  check(nightly.data?.task.url === `${s.endpointUrl}/nightly` && nightly.data.timezone === 'Europe/Berlin', 'get schedule');
  done('getSchedule');
  const unscheduled = await writer.DELETE('/v1/schedules/{name}', named);
  check(unscheduled.response.status === 204, 'delete schedule');
  done('deleteSchedule');

  // Pulling: a queue made a pull queue at run time; its task, enqueued without a url, is leased
  // by a pull and completed with the pulled lease's token.
  const inbox = { params: { path: { queue: 'client-inbox' } } };
  await admin.PUT('/v1/queues/{queue}', { ...inbox, body: { pull: true } });
  const pullable = await writer.POST('/v1/tasks', { body: { queue: 'client-inbox', body: { n: 5 } } });
  check(pullable.response.status === 201 && pullable.data && 'url' in pullable.data && pullable.data.url === null, 'enqueue without a url');
  const pulled = await admin.POST('/v1/queues/{queue}/lease', { ...inbox, body: { max: 5, wait_ms: 1_000 } });
  const leased = pulled.data?.tasks[0];
  check(leased && leased.id === pullable.data?.id && leased.attempt === 1 && pulled.data?.tasks.length === 1, 'pull');
  done('pullTasks');
  const pulledLease = createClient<paths>({ baseUrl: s.baseUrl, headers: { authorization: `Bearer ${leased.lease.token}` } });
  const ended = await pulledLease.POST('/v1/leases/{lease_id}/complete', { params: { path: { lease_id: leased.lease.id } }, body: {} });
  check(ended.data?.status === 'succeeded', 'complete a pulled lease');

  const secret = await admin.GET('/v1/webhooks/secret', { params: { query: { url: `${s.endpointUrl}/one` } } });
  check(secret.data?.secret.startsWith('whsec_'), 'webhook secret');
  done('getWebhookSecret');
  const forwarding = await admin.GET('/v1/webhooks/forwarding', { params: { query: { url: 'http://localhost:3000/task' } } });
  check(forwarding.data?.issuer === 'sluice-forward' && forwarding.data.webhook_secret?.startsWith('whsec_'), 'forwarding');
  done('getForwarding');

  // Endpoint groups: put, replaced, read, listed and deleted (no task names it here: each would
  // add pushes this program does not wait for).
  const group = { params: { path: { name: 'client-fanout' } } };
  const made = await admin.PUT('/v1/groups/{name}', { ...group, body: { urls: [`${s.endpointUrl}/a`] } });
  check(made.response.status === 201 && made.data?.urls.length === 1, 'put group');
  const replaced = await admin.PUT('/v1/groups/{name}', { ...group, body: { urls: [`${s.endpointUrl}/a`, `${s.endpointUrl}/b`] } });
  check(replaced.response.status === 200 && replaced.data?.urls.length === 2, 'replace group');
  done('putGroup');
  const shownGroup = await admin.GET('/v1/groups/{name}', group);
  check(shownGroup.data?.name === 'client-fanout' && shownGroup.data.urls[1] === `${s.endpointUrl}/b`, 'get group');
  done('getGroup');
  const listedGroups = await admin.GET('/v1/groups', { params: { query: { limit: 10 } } });
  check(
    listedGroups.data?.groups.some((g) => g.name === 'client-fanout'),
    'list groups',
  );
  done('listGroups');
  const ungrouped = await admin.DELETE('/v1/groups/{name}', group);
  check(ungrouped.response.status === 204, 'delete group');
  done('deleteGroup');

  // Waits: a parent enqueues a child (delayed, so it stays pending) and waits for it; then the
  // parent is cancelled, and its child with it.
  await writer.POST('/v1/tasks', { body: { queue: 'family', url: `${s.endpointUrl}/parent` } });
  const parent = await s.pushTo('/parent');
  const child = await writer.POST('/v1/tasks', {
    body: { queue: 'family', url: `${s.endpointUrl}/child`, parent_id: parent.taskId, delay_ms: 3_600_000 },
  });
  const waiting = await leaseAs(parent).POST('/v1/leases/{lease_id}/wait', { ...params(parent), body: {} });
  check(child.data && 'id' in child.data && waiting.data?.status === 'waiting' && waiting.data.waiting_on[0] === child.data.id, 'wait');
  done('waitForChildren');
  const children = await writer.GET('/v1/tasks/{id}/children', { params: { path: { id: parent.taskId } } });
  check(children.data?.children[0]?.parent_id === parent.taskId, 'children');
  done('listChildren');
  await writer.POST('/v1/tasks/{id}/cancel', { params: { path: { id: parent.taskId } } });

  // Endpoint health, a pause and a resume by hand (admin), and a replay counted (a dry run).
  const origin = new URL(s.endpointUrl).origin;
  const endpoints = await writer.GET('/v1/endpoints');
  check(Array.isArray(endpoints.data?.endpoints), 'endpoints');
  done('listEndpoints');
  const byHand = await admin.POST('/v1/endpoints/{origin}/pause', { params: { path: { origin } } });
  check(byHand.data?.origin === origin && byHand.data.state === 'paused' && byHand.data.paused_by === 'hand', 'pause endpoint');
  done('pauseEndpoint');
  const healthy = await admin.POST('/v1/endpoints/{origin}/resume', { params: { path: { origin } } });
  check(healthy.data?.state === 'healthy' && healthy.data.paused_by === null, 'resume endpoint');
  done('resumeEndpoint');
  const replay = await writer.POST('/v1/tasks/redrive', { body: { url_prefix: `${s.endpointUrl}/`, dry_run: true } });
  check(replay.data?.dry_run === true && replay.data.redriven === 0 && typeof replay.data.matched === 'number', 'redrive');
  done('redriveTasks');

  const metrics = await admin.GET('/metrics', { parseAs: 'text' });
  check(typeof metrics.data === 'string' && metrics.data.includes('# TYPE sluice_acquired_total counter'), 'metrics');
  done('getMetrics');
  return called;
}
