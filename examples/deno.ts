/** The handler on Deno: `SLUICE_URL=… PORT=… deno run --allow-net --allow-env --allow-read examples/deno.ts`. */
import { exampleHandler } from './handler.ts';

const handler = exampleHandler(Deno.env.get('SLUICE_URL') ?? 'http://127.0.0.1:8787');
Deno.serve(
  { port: Number(Deno.env.get('PORT') ?? 3000), hostname: '127.0.0.1', onListen: ({ port }) => console.log(`listening on ${port}`) },
  (request) => handler(request),
);

declare const Deno: {
  env: { get(name: string): string | undefined };
  serve(
    options: { port: number; hostname: string; onListen(addr: { port: number }): void },
    handler: (request: Request) => Promise<Response>,
  ): unknown;
};
