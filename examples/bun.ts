/** The handler on Bun: `SLUICE_URL=… PORT=… bun examples/bun.ts`. */
import { exampleHandler } from './handler.ts';

const handler = exampleHandler(process.env.SLUICE_URL ?? 'http://127.0.0.1:8787');
const server = Bun.serve({ port: Number(process.env.PORT ?? 3000), hostname: '127.0.0.1', fetch: (request) => handler(request) });
console.log(`listening on ${server.port}`);

declare const Bun: { serve(options: { port: number; hostname: string; fetch(request: Request): Promise<Response> }): { port: number } };
