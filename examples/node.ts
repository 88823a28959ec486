/** The handler on Node ≥ 22: `SLUICE_URL=… PORT=… node examples/node.ts`. */
import { serve } from '@hono/node-server';
import { exampleHandler } from './handler.ts';

const handler = exampleHandler(process.env.SLUICE_URL ?? 'http://127.0.0.1:8787');
const server = serve({ fetch: (request) => handler(request), port: Number(process.env.PORT ?? 3000), hostname: '127.0.0.1' }, (info) =>
  console.log(`listening on ${info.port}`),
);
process.on('SIGTERM', () => server.close(() => process.exit(0)));
