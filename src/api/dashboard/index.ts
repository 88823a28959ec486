/**
 * /dashboard: server-rendered pages for operators, served by the same app on the Worker and on
 * Node. An admin key logs in once (session.ts); every POST is checked against request forgery
 * (guard.ts); every change goes through the same code as its API call (actions.ts).
 */
import { type Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { NotFoundError, SluiceError } from '../../core/errors.ts';
import { endpointsList } from '../../db/endpoints.ts';
import { groupList } from '../../db/groups.ts';
import { metricsRead } from '../../db/metrics.ts';
import { taskCountDead } from '../../db/tasks.ts';
import { authenticateKey } from '../auth.ts';
import { readForm } from '../body.ts';
import type { AppEnv } from '../context.ts';
import { problemOf, UNAVAILABLE_RETRY_AFTER_S } from '../problem.ts';
import { concurrencyKey, concurrencyPicture, describeQueue, listQueues, queueName } from '../queue-ops.ts';
import { getTask, listTasks } from '../task-ops.ts';
import { ACTIONS, type Params } from './actions.ts';
import { curlLine, redriveAllLines } from './curl.ts';
import { contentSecurityPolicy, overHttps, sameOrigin, securityHeaders } from './guard.ts';
import { type PageOptions, page, SCRIPT, STYLE } from './layout.ts';
import { endpointsView, worstFirst } from './pages/endpoints.ts';
import { confirmView, errorView, loginView } from './pages/forms.ts';
import { groupsView } from './pages/groups.ts';
import { queuesView } from './pages/queues.ts';
import { queuePage, slotsFragment } from './pages/slots.ts';
import { deadView, type TaskFilters, taskListView, taskPage } from './pages/tasks.ts';
import { waitingByQueue, waitingView } from './pages/waiting.ts';
import { SESSION_COOKIE, SESSION_TTL_MS, signSession, verifySession } from './session.ts';

type DashEnv = { Bindings: AppEnv['Bindings']; Variables: AppEnv['Variables'] & { admin: string } };
type Ctx = Context<DashEnv>;

export const dashboard = new Hono<DashEnv>();

const NOTICE_COOKIE = 'sluice_notice';
const FORM_BYTES = 16 * 1024;
/** Dead tasks counted for the dead-letters page, at most. */
const DEAD_COUNT_CAP = 10_000;
const PAGE_SIZE = 50;

let policy: Promise<string> | null = null;

dashboard.use('*', async (c, next) => {
  policy ??= contentSecurityPolicy(SCRIPT, STYLE);
  const headers = securityHeaders(await policy);
  await next();
  for (const [name, value] of Object.entries(headers)) c.header(name, value);
});

dashboard.use('*', async (c, next) => {
  if (c.req.method === 'POST' && !sameOrigin(c.req.raw, c.var.config.publicOrigin)) {
    throw new SluiceError(
      403,
      'cross_site_request',
      'refused: this request does not come from a page of this host (Origin, Sec-Fetch-Site or Referer); behind a reverse proxy that rewrites Host, set SLUICE_PUBLIC_URL or have the proxy pass Host on',
    );
  }
  await next();
});

function cookieOptions(c: Ctx) {
  return { path: '/dashboard', httpOnly: true, secure: overHttps(c.req.raw, c.var.config.publicOrigin), sameSite: 'Strict' as const };
}

/** A page: the shell, the signed-in key, and the notice an action left (shown once). */
function render(c: Ctx, options: PageOptions, body: Parameters<typeof page>[1], status: 200 | 401 | 403 | 404 | 429 = 200) {
  let notice = options.notice ?? null;
  const flash = getCookie(c, NOTICE_COOKIE);
  if (flash !== undefined) {
    deleteCookie(c, NOTICE_COOKIE, cookieOptions(c));
    try {
      notice ??= JSON.parse(flash) as { text: string; error?: boolean };
    } catch {
      // Not ours: ignore it.
    }
  }
  return c.html(page({ ...options, keyName: c.var.admin, notice }, body), status);
}

/**
 * Where to go after logging in: a dashboard path of this host, nothing else. Printable ASCII
 * without a backslash: no control character (CR, LF, NUL) can reach the Location header.
 */
function nextPath(text: string | null | undefined): string {
  return text && /^\/dashboard(?:[/?][\x20-\x5b\x5d-\x7e]*)?$/.test(text) && !text.startsWith('/dashboard//') ? text : '/dashboard';
}

dashboard.get('/login', (c) => render(c, { title: 'Sign in' }, loginView(nextPath(c.req.query('next')), null)));

dashboard.post('/login', async (c) => {
  const form = await readForm(c.req.raw, FORM_BYTES);
  const next = nextPath(form.get('next'));
  let entry: Awaited<ReturnType<typeof authenticateKey>>;
  try {
    // Bad keys count against the client's address, as on the API: 429 once braked.
    entry = await authenticateKey(c.var.config.apiKeys, c.var.clientAddress, (form.get('key') ?? '').trim());
  } catch (error) {
    const problem = problemOf(error);
    if (problem.status !== 401 && problem.status !== 429) throw error;
    if (problem.status === 429) c.header('retry-after', String((error as { retryAfterS?: number }).retryAfterS ?? 60));
    return render(c, { title: 'Sign in' }, loginView(next, problem.detail), problem.status);
  }
  if (!entry.scopes.includes('admin')) {
    return render(
      c,
      { title: 'Sign in' },
      loginView(next, `the key "${entry.name}" lacks the admin scope: only admin keys may use the dashboard`),
      403,
    );
  }
  if (entry.queues) {
    return render(
      c,
      { title: 'Sign in' },
      loginView(next, `the key "${entry.name}" is limited to queues, and the dashboard shows every queue: use an admin key of every queue`),
      403,
    );
  }
  setCookie(c, SESSION_COOKIE, signSession(c.var.config.signingKeys, entry, Date.now()), {
    ...cookieOptions(c),
    maxAge: SESSION_TTL_MS / 1000,
  });
  return c.redirect(next, 303);
});

dashboard.post('/logout', (c) => {
  deleteCookie(c, SESSION_COOKIE, cookieOptions(c));
  return c.redirect('/dashboard/login', 303);
});

// Everything below needs a session.
dashboard.use('*', async (c, next) => {
  const token = getCookie(c, SESSION_COOKIE);
  const entry = token ? verifySession(c.var.config.signingKeys, c.var.config.apiKeys, token, Date.now()) : null;
  if (!entry) {
    const url = new URL(c.req.url);
    if (c.req.method === 'GET' && !url.pathname.endsWith('/live')) {
      return c.redirect(`/dashboard/login?${new URLSearchParams({ next: url.pathname + url.search })}`, 303);
    }
    return c.html(page({ title: 'Signed out' }, errorView(401, 'Your session has ended: sign in again.')), 401);
  }
  c.set('admin', entry.name);
  await next();
});

dashboard.get('/', async (c) => {
  const { config, db } = c.var;
  const [queues, read] = await Promise.all([listQueues(config, db), metricsRead(db, 0)]);
  const succeeded = new Map(read.taskCounts.filter((t) => t.status === 'succeeded').map((t) => [t.queue, t.n]));
  const body = queuesView(queues, { byQueue: succeeded, countedAt: read.countedAt }, config.clusterCap, config.retentionMs, new Date());
  return render(c, { title: 'Queues', section: '/' }, body);
});

dashboard.get('/queues/:queue', async (c) => {
  const { config, db } = c.var;
  const name = queueName(c.req.param('queue'));
  const [queue, picture] = await Promise.all([describeQueue(config, db, name), concurrencyPicture(config, db, name)]);
  return render(c, { title: `Queue ${name}`, section: '/' }, queuePage(queue, picture, config.metricsTopKeys));
});

dashboard.get('/queues/:queue/live', async (c) => {
  const picture = await concurrencyPicture(c.var.config, c.var.db, queueName(c.req.param('queue')));
  return c.html(slotsFragment(picture, c.var.config.metricsTopKeys));
});

/** The list filters of a query string, empty ones left out (the API's schema refuses them). */
function filters(c: Ctx, fields: readonly (keyof TaskFilters | 'cursor')[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of fields) {
    const v = c.req.query(f);
    if (v) out[f] = v;
  }
  return out;
}

async function queueNames(c: Ctx): Promise<string[]> {
  return (await listQueues(c.var.config, c.var.db)).map((q) => q.name);
}

dashboard.get('/tasks', async (c) => {
  const query = filters(c, ['queue', 'status', 'concurrency_key', 'cursor']);
  const [{ tasks, nextCursor }, names] = await Promise.all([listTasks(c.var.db, { ...query, limit: String(PAGE_SIZE) }), queueNames(c)]);
  return render(c, { title: 'Tasks', section: '/tasks' }, taskListView(tasks, query, names, nextCursor));
});

dashboard.get('/tasks/:id', async (c) => {
  const { task, attempts } = await getTask(c.var.db, c.req.param('id'));
  return render(c, { title: `Task #${task.id}`, section: '/tasks' }, taskPage(task, attempts, new Date()));
});

dashboard.get('/dead', async (c) => {
  const query = filters(c, ['queue', 'concurrency_key', 'cursor']);
  const filter = {
    queue: query.queue === undefined ? undefined : queueName(query.queue),
    concurrencyKey: query.concurrency_key === undefined ? undefined : concurrencyKey(query.concurrency_key),
  };
  const [{ tasks, nextCursor }, names, matching] = await Promise.all([
    listTasks(c.var.db, { ...query, status: 'dead', limit: String(PAGE_SIZE) }),
    queueNames(c),
    taskCountDead(c.var.db, filter, DEAD_COUNT_CAP),
  ]);
  return render(c, { title: 'Dead letters', section: '/dead' }, deadView(tasks, query, names, nextCursor, matching, DEAD_COUNT_CAP));
});

dashboard.get('/groups', async (c) => {
  const groups = await groupList(c.var.db, { limit: GROUPS_SHOWN + 1 });
  return render(
    c,
    { title: 'Endpoint groups', section: '/groups' },
    groupsView(groups.slice(0, GROUPS_SHOWN), groups.length > GROUPS_SHOWN),
  );
});

/** Groups the page shows, by name. */
const GROUPS_SHOWN = 200;

dashboard.get('/waiting', async (c) => {
  const read = await metricsRead(c.var.db, 0);
  return render(c, { title: 'Waiting time', section: '/waiting' }, waitingView(waitingByQueue(read.counters)));
});

/** Origins the endpoints page shows, those not healthy first. */
const ENDPOINTS_SHOWN = 200;

dashboard.get('/endpoints', async (c) => {
  const [endpoints, names] = await Promise.all([endpointsList(c.var.db), queueNames(c)]);
  const shown = worstFirst(endpoints).slice(0, ENDPOINTS_SHOWN);
  return render(c, { title: 'Endpoints', section: '/endpoints' }, endpointsView(shown, endpoints.length, names));
});

function actionOf(c: Ctx) {
  const name = c.req.param('action') ?? '';
  // Own names only: `constructor`, `__proto__` and `toString` are found on every object.
  if (!Object.hasOwn(ACTIONS, name)) throw new NotFoundError(`a dashboard action ${name}`);
  return ACTIONS[name]!;
}

dashboard.get('/confirm/:action', async (c) => {
  const action = actionOf(c);
  const params: Params = {};
  for (const f of action.fields) {
    const v = c.req.query(f);
    if (v !== undefined) params[f] = v;
  }
  const described = await action.describe(params, c.var);
  // Behind a proxy, the URL the operator's curl reaches: the public one, when it is set.
  const origin = c.var.config.publicOrigin ?? new URL(c.req.url).origin;
  const api = described.call ? curlLine(origin, described.call) : redriveAllLines(origin, params);
  return render(c, { title: described.title }, confirmView(c.req.param('action'), action.fields, params, described, api));
});

dashboard.post('/actions/:action', async (c) => {
  const action = actionOf(c);
  const form = await readForm(c.req.raw, FORM_BYTES);
  const params: Params = {};
  for (const f of action.fields) {
    const v = form.get(f);
    if (v !== null) params[f] = v;
  }
  const { back } = await action.describe(params, c.var);
  const done = await action.perform(c.var, params);
  const { text, next } = typeof done === 'string' ? { text: done, next: back } : done;
  setCookie(c, NOTICE_COOKIE, JSON.stringify({ text }), { ...cookieOptions(c), maxAge: 60 });
  return c.redirect(next, 303);
});

dashboard.onError((error, c) => {
  const problem = problemOf(error);
  if (problem.status >= 500) console.error(error);
  if (problem.status === 503) c.header('retry-after', String(UNAVAILABLE_RETRY_AFTER_S));
  const detail = problem.issues?.length ? problem.issues.map((i) => `${i.path}: ${i.message}`).join('; ') : problem.detail;
  return c.html(page({ title: problem.title, keyName: c.var.admin }, errorView(problem.status, detail)), problem.status as 400);
});
