import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import type http from 'node:http';
import { createRegistry, httpMetrics, type HttpMetrics } from '../../images/service-kit/src/index.js';

/** A request and its response as the middleware sees them (the response emits 'finish' when told). */
function exchange(method: string, status: number): { req: http.IncomingMessage; res: http.ServerResponse } {
  const req = { method } as http.IncomingMessage;
  const res = Object.assign(new EventEmitter(), { req, statusCode: status }) as unknown as http.ServerResponse;
  return { req, res };
}

/** By "method status": [requests counted, latencies observed], as a reader of the two metrics sees them. */
async function countsOf(metrics: HttpMetrics): Promise<Record<string, [number, number]>> {
  const counts: Record<string, [number, number]> = {};
  for (const v of (await metrics.requests.get()).values) counts[`${v.labels.method} ${v.labels.status}`] = [v.value, 0];
  for (const v of (await metrics.duration.get()).values)
    if (v.metricName === 'http_request_duration_seconds_count') counts[`${v.labels.method} ${v.labels.status}`]![1] = v.value;
  return counts;
}

/**
 * Request counts and latencies by method, route and status (metrics.ts, httpMetrics), kept in memory and
 * handed to prom-client when read: a reader sees every answered request once, as direct observations would.
 */
describe('service-kit: HTTP metrics', () => {
  it('counts every answered request once per read, by method, route and status, past the in-memory batch too', async () => {
    const registry = createRegistry('test', false);
    const metrics = httpMetrics(registry, (req) => (req.method === 'GET' ? 'GetObject' : 'PutObject'));
    const answer = (method: string, status: number, n: number) => {
      for (let i = 0; i < n; i++) {
        const { req, res } = exchange(method, status);
        metrics.middleware(req, res, () => undefined);
        res.emit('finish');
      }
    };
    answer('GET', 200, 1000);
    answer('GET', 404, 3);
    answer('PUT', 200, 2);
    // Not answered yet: not counted.
    const { req, res } = exchange('GET', 200);
    metrics.middleware(req, res, () => undefined);
    expect(await countsOf(metrics)).to.deep.equal({ 'GET 200': [1000, 1000], 'GET 404': [3, 3], 'PUT 200': [2, 2] });
    expect(await registry.metrics()).to.include('http_requests_total{method="GET",route="GetObject",status="200",service="test"} 1000');

    res.emit('finish');
    answer('GET', 404, 1);
    expect(await countsOf(metrics)).to.deep.equal({ 'GET 200': [1001, 1001], 'GET 404': [4, 4], 'PUT 200': [2, 2] });
  });

  it('names the route a handler gives, for the requests it observes itself', async () => {
    const registry = createRegistry('test', false);
    const metrics = httpMetrics(registry);
    const { req, res } = exchange('POST', 201);
    metrics.observe(req, res, '/v1/chat/completions');
    res.emit('finish');
    const counted = (await metrics.requests.get()).values.map((v) => [v.labels.route, v.labels.status, v.value]);
    expect(counted).to.deep.equal([['/v1/chat/completions', '201', 1]]);
  });
});
