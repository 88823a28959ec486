/**
 * One task handler, served unchanged by every runtime example beside it. Two routes:
 *   /quick  answers within the push (respond mode)
 *   /long   keeps the lease and heartbeats while it works (lease mode)
 * A task body `{ "ms": n }` makes the work take n ms; `{ "fail": "never" }` fails for good.
 */
import { createHandler, type ExecutionContextLike, NonRetriableError, type Push, type TaskContext } from '../src/sdk/index.ts';

async function work(push: Push, ctx: TaskContext) {
  const input = push.json<{ ms?: number; fail?: string }>() ?? {};
  if (input.fail === 'never') throw new NonRetriableError('this task can never succeed');
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(resolve, input.ms ?? 0);
    ctx.signal.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(ctx.signal.reason);
    });
  });
  return { done: push.taskId, attempt: push.attempt, runtime: runtimeName() };
}

export function exampleHandler(sluiceUrl: string): (request: Request, ctx?: ExecutionContextLike) => Promise<Response> {
  const quick = createHandler(work, { sluiceUrl });
  const long = createHandler(work, { sluiceUrl, mode: 'lease' });
  return (request, ctx) => {
    const { pathname } = new URL(request.url);
    if (pathname === '/quick') return quick(request, ctx);
    if (pathname === '/long') return long(request, ctx);
    return Promise.resolve(new Response('not found', { status: 404 }));
  };
}

function runtimeName(): string {
  const g = globalThis as { Bun?: unknown; Deno?: unknown; navigator?: { userAgent?: string } };
  if (g.Bun) return 'bun';
  if (g.Deno) return 'deno';
  if (g.navigator?.userAgent === 'Cloudflare-Workers') return 'workerd';
  return 'node';
}
