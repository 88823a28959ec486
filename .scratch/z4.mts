import { z } from 'zod';
import * as a from '../src/api/answers.ts';
const uri = (id: string) => `#/components/schemas/${id}`;
const all = z.toJSONSchema(a.components, { io: 'output', uri, target: 'draft-2020-12', metadata: a.components } as any);
console.log(JSON.stringify(all.schemas.TaskState), JSON.stringify(all.schemas.TaskDetail).slice(0,300));
