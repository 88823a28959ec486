/** GET /metrics: Prometheus text format, for a `metrics:read` (or admin) key of every queue. */
import { Hono } from 'hono';
import { metricsRead } from '../../db/metrics.ts';
import { queueOverrides } from '../../db/queues.ts';
import { requireScope } from '../auth.ts';
import type { AppEnv } from '../context.ts';
import { PROMETHEUS_CONTENT_TYPE, renderMetrics } from '../prometheus.ts';
import { requireEveryQueue } from '../queue-access.ts';

export const metrics = new Hono<AppEnv>();

metrics.get('/', requireScope('metrics:read'), async (c) => {
  // A scrape shows every queue and the cluster's totals: nothing a key limited to queues may read.
  requireEveryQueue(c.var.queueScope, 'a scrape');
  const { config, db } = c.var;
  const [read, overrides] = await Promise.all([metricsRead(db, config.metricsTopKeys, config.metricsTopEndpoints), queueOverrides(db)]);
  return c.body(renderMetrics(config, read, overrides, c.var.processStats?.() ?? null), 200, {
    'content-type': PROMETHEUS_CONTENT_TYPE,
    'cache-control': 'no-store',
  });
});
