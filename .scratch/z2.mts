import { z } from 'zod';
const reg = z.registry<{ id: string; description?: string }>();
const Task = z.object({ id: z.string(), n: z.int().nullable() });
reg.add(Task, { id: 'Task' });
const List = z.object({ tasks: z.array(Task), next: z.string().nullable() });
const Detail = Task.extend({ body: z.unknown().optional() });
reg.add(Detail, { id: 'TaskDetail' });
const uri = (id: string) => `#/components/schemas/${id}`;
console.log(JSON.stringify(z.toJSONSchema(reg, { io: 'output', uri, target: 'draft-2020-12' })));
try { console.log(JSON.stringify(z.toJSONSchema(List, { io: 'output', metadata: reg, uri, target: 'draft-2020-12' } as any))); } catch (e) { console.log('ERR', e.message); }
try { console.log(JSON.stringify((z as any).toJSONSchema(List, { io: 'output', metadata: reg, target: 'draft-2020-12', external: { registry: reg, uri, defs: {} } }))); } catch (e) { console.log('ERR', e.message); }
