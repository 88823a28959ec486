/**
 * The OpenAPI 3.1 document, served at /openapi.json and rendered at /docs: its requests come from
 * the zod schemas the API validates with, its answers from the zod schemas of answers.ts: no
 * second copy of either (schemas.ts turns both into JSON Schema). Its paths are in paths-tasks.ts,
 * paths-queues.ts and paths-meta.ts, made of the pieces in operation.ts.
 */

import { queueSettingsPatchSchema } from '../../core/queue-settings.ts';
import { enqueueSchema } from '../schemas/enqueue.ts';
import { metaPaths } from './paths-meta.ts';
import { queuePaths } from './paths-queues.ts';
import { taskPaths } from './paths-tasks.ts';
import { answerComponents, json, scheduleRequest } from './schemas.ts';

export function openApiDocument(): object {
  return {
    openapi: '3.1.0',
    info: {
      title: 'Sluice',
      version: '1',
      description: 'Serverless task queue with signed HTTP push delivery and hard concurrency limits.',
      license: { name: 'MIT', identifier: 'MIT' },
    },
    servers: [{ url: '/', description: 'This Sluice' }],
    components: {
      schemas: {
        EnqueueRequest: json(enqueueSchema),
        QueueOverride: json(queueSettingsPatchSchema),
        ScheduleRequest: scheduleRequest(),
        ...answerComponents(),
      },
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'An API key (sk_sluice_…).' },
        leaseToken: { type: 'http', scheme: 'bearer', description: 'The Sluice-Lease-Token of the push.' },
      },
    },
    paths: { ...taskPaths(), ...queuePaths(), ...metaPaths() },
  };
}
