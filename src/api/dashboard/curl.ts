/**
 * The API call a dashboard action makes, as the confirmation page shows it: a curl line an operator
 * can run with an admin key in `$SLUICE_API_KEY` (src/api/dashboard/index.ts).
 */
import type { ApiCall, Params } from './actions.ts';

/** Single-quoted for a POSIX shell. */
function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

/** The curl line that makes the same change through the API, with an admin key in `$SLUICE_API_KEY`. */
export function curlLine(origin: string, call: ApiCall): string {
  const parts = [`curl -s -X ${call.method} ${shellQuote(origin + call.path)}`, `-H "authorization: Bearer $SLUICE_API_KEY"`];
  if (call.body) parts.push(`-H 'content-type: application/json' -d ${shellQuote(JSON.stringify(call.body))}`);
  return parts.join(' ');
}

/** What does "redrive all" through the API: list the dead tasks, redrive each. */
export function redriveAllLines(origin: string, p: Params): string {
  const query = new URLSearchParams({ status: 'dead', limit: '500' });
  if (p.queue) query.set('queue', p.queue);
  if (p.concurrency_key) query.set('concurrency_key', p.concurrency_key);
  return [
    `curl -s ${shellQuote(`${origin}/v1/tasks?${query}`)} -H "authorization: Bearer $SLUICE_API_KEY" \\`,
    `  | jq -r '.tasks[].id' | while read -r id; do`,
    `  curl -s -X POST ${shellQuote(`${origin}/v1/tasks/`)}"$id/retry" -H "authorization: Bearer $SLUICE_API_KEY"; done`,
    '# repeat while the listing is not empty',
  ].join('\n');
}
