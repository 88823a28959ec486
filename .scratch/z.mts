import { z } from 'zod';
const s = z.object({ a: z.iso.datetime(), b: z.int().nullable(), c: z.unknown().optional(), d: z.enum(['x','y']).nullable(), e: z.object({x: z.int()}).nullable().describe('hi') }).meta({ description: 'top' });
console.log(JSON.stringify(z.toJSONSchema(s, { io: 'output', target: 'draft-2020-12' }), null, 1));
