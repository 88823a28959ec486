import { z } from 'zod';
import * as a from '../src/api/answers.ts';
const uri = (id: string) => `#/components/schemas/${id}`;
const all = z.toJSONSchema(a.components, { io: 'output', uri, target: 'draft-2020-12' });
console.log(Object.keys(all.schemas), JSON.stringify(all.schemas.TaskState));
console.log(JSON.stringify(z.toJSONSchema(a.taskList, { io: 'output', metadata: a.components, target: 'draft-2020-12' })).slice(0, 400));
console.log(JSON.stringify(z.toJSONSchema(a.taskOrState, { io: 'output', metadata: a.components, target: 'draft-2020-12' })).slice(0, 400));
console.log(JSON.stringify(z.toJSONSchema(a.enqueued, { io: 'output', metadata: a.components, target: 'draft-2020-12' })).slice(0, 300));
