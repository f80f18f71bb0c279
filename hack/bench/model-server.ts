/**
 * `npm run bench:model-server`: throughput and latency of the model server at concurrency 1, 8 and 32,
 * with dynamic batching on and off in the same run, plus the server's resident memory.
 *
 * Two levels, both with batching on and off:
 *  - engine: the generation scheduler and ONNX model in this process, no HTTP — what batching changes;
 *  - HTTP: the real server as a child process (`images/model-server/src/main.ts`) under concurrent
 *    clients (keep-alive connections on raw sockets, see Connection), so the RSS reported is the server's own (process_resident_memory_bytes from /metrics).
 *    Its generation engine runs in a worker thread (the default); a last run with batching on and
 *    MODEL_SERVER_WORKER=false (engine on the HTTP thread) at concurrency 1 and 32 shows what the worker changes.
 * Requests are greedy, 12 random content ids each by default (the model copies them: 12 tokens + EOS).
 * Besides wall-clock figures it reports CPU time per generated token (this process for the engine,
 * the server's process_cpu_seconds_total for HTTP): on a shared machine, wall-clock throughput mostly
 * measures what the other processes leave over, while CPU per token measures the work itself. The mean
 * batch (sequences per decoder step; the server's model_server_batch_size) shows how full the batch
 * was kept: with batching, tokens/s is about mean batch × decoder steps per second.
 * Options: --seconds N per measurement (default 5; --seconds 2 is a quick run of about a minute);
 * --prompt-tokens N or MIN-MAX content ids per request (default 12; a range draws each request's length
 * at random, so answers of different lengths keep closed-loop clients from finishing in lockstep).
 * --pairs N (default 3): after those runs, N more measurements at concurrency 32 on two servers running
 * side by side, batching on and off, taken in alternating order (on/off, off/on, …); the median of
 * their ratios is the speed-up least bent by a machine whose speed drifts within a minute.
 * The start and end load averages are printed: on a shared machine they explain most of the spread.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import os from 'node:os';
import { parseArgs } from 'node:util';
import { DEFAULT_MODEL_DIR } from '../../images/model-server/src/app.js';
import { GenerationScheduler } from '../../images/model-server/src/generation-scheduler.js';
import { MAX_PROMPT_TOKENS, SPECIAL_TOKENS } from '../../images/model-server/src/model-spec.js';
import { OnnxTransformer } from '../../images/model-server/src/onnx-transformer.js';
import { TokenSampler } from '../../images/model-server/src/token-sampler.js';

const { values: args } = parseArgs({
  options: { seconds: { type: 'string', default: '5' }, 'prompt-tokens': { type: 'string', default: '12' }, pairs: { type: 'string', default: '3' } },
});
const SECONDS = Number(args.seconds);
const PAIRS = Number(args.pairs);
if (!(Number.isInteger(PAIRS) && PAIRS >= 0)) throw new Error(`--pairs: a whole number, not ${args.pairs}`);
/** Content ids per prompt: the context minus the role token and EOS. */
const MAX_CONTENT_IDS = MAX_PROMPT_TOKENS - 2;
const [PROMPT_MIN, PROMPT_MAX] = (() => {
  const m = /^(\d+)(?:-(\d+))?$/.exec(args['prompt-tokens']);
  const [min, max] = m ? [Number(m[1]), Number(m[2] ?? m[1])] : [NaN, NaN];
  if (!(min >= 1 && max >= min && max <= MAX_CONTENT_IDS)) {
    throw new Error(`--prompt-tokens: a number or a range MIN-MAX within 1-${MAX_CONTENT_IDS}, not ${args['prompt-tokens']}`);
  }
  return [min, max];
})();
const CONCURRENCY = [1, 8, 32];

interface Measurement {
  batching: boolean;
  /** The generation engine in a worker thread (the default) or on the HTTP thread. */
  worker: boolean;
  concurrency: number;
  requests: number;
  tokens: number;
  tokensPerSecond: number;
  p50Ms: number;
  p99Ms: number;
  /** End to end: client-observed request time divided by its generated tokens, median. */
  msPerTokenE2E: number;
  /** Server side: mean time between consecutive tokens of a sequence (decoder step incl. batching). */
  serverMsPerToken: number;
  /** Server CPU time (all threads) per generated token: what the work costs, whatever else runs on the machine. */
  serverCpuMsPerToken: number;
  /** This process's CPU time per request: the load generator shares the machine's two cores with the server. */
  clientCpuMsPerRequest: number;
  /** Mean sequences per decoder step (model_server_batch_size): how full the batch was, whatever the machine's load. */
  meanBatch: number;
}

/**
 * The load generator's client: one HTTP/1.1 keep-alive connection per concurrent client on a raw
 * socket, one request at a time, responses framed by Content-Length. It shares the machine's two
 * cores with the server, so it is kept cheap: node:http's client cost 0.1–0.5 CPU-ms per request,
 * CPU the server (and the batched server most, with the most requests per second) went without.
 */
class Connection {
  private readonly socket: net.Socket;
  private readonly connected: Promise<void>;
  private received: Buffer = Buffer.alloc(0);
  private pending: { resolve: (r: { status: number; text: string }) => void; reject: (e: Error) => void } | undefined;

  constructor(url: string) {
    const { hostname, port } = new URL(url);
    this.socket = net.connect(Number(port), hostname);
    this.socket.setNoDelay(true);
    this.connected = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve);
      this.socket.once('error', reject);
    });
    this.socket.on('data', (data: Buffer) => this.onData(data));
    this.socket.on('error', (err) => this.fail(err));
    this.socket.on('close', () => this.fail(new Error('connection closed')));
  }

  async post(path: string, body: string): Promise<{ status: number; text: string }> {
    await this.connected;
    return new Promise((resolve, reject) => {
      this.pending = { resolve, reject };
      this.socket.write(`POST ${path} HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
    });
  }

  close(): void {
    this.pending = undefined;
    this.socket.destroy();
  }

  private onData(data: Buffer): void {
    this.received = this.received.length === 0 ? data : Buffer.concat([this.received, data]);
    const headerEnd = this.received.indexOf('\r\n\r\n');
    if (headerEnd < 0) return;
    const head = this.received.toString('latin1', 0, headerEnd);
    const length = /\r\ncontent-length: *(\d+)/i.exec(head);
    if (!length) return this.fail(new Error(`response without Content-Length: ${head}`));
    const end = headerEnd + 4 + Number(length[1]);
    if (this.received.length < end) return;
    const response = { status: Number(head.slice(9, 12)), text: this.received.toString('utf8', headerEnd + 4, end) };
    this.received = this.received.subarray(end);
    const pending = this.pending;
    this.pending = undefined;
    pending?.resolve(response);
  }

  private fail(err: Error): void {
    const pending = this.pending;
    this.pending = undefined;
    pending?.reject(err);
  }
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

async function startServer(batching: boolean, worker: boolean): Promise<{ child: ChildProcess; url: string }> {
  const port = await freePort();
  // The memory settings the image uses (images/model-server/Dockerfile): a small young generation and
  // two malloc arenas keep the RSS of a steady allocation churn down.
  const child = spawn(process.execPath, ['--max-semi-space-size=2', '--import', 'tsx', 'images/model-server/src/main.ts'], {
    env: {
      ...process.env,
      MALLOC_ARENA_MAX: '2',
      MODEL_SERVER_PORT: String(port),
      MODEL_SERVER_HOST: '127.0.0.1',
      MODEL_SERVER_BATCHING: String(batching),
      MODEL_SERVER_WORKER: String(worker),
      LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(`${url}/readyz`)).ok) return { child, url };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill();
  throw new Error('model server did not become ready');
}

async function metric(url: string, name: string): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? ([0-9.e+-]+)$`, 'm').exec(text);
  return m ? Number(m[1]) : NaN;
}

function randomIds(): number[] {
  const length = PROMPT_MIN + Math.floor(Math.random() * (PROMPT_MAX - PROMPT_MIN + 1));
  return Array.from({ length }, () => 10 + Math.floor(Math.random() * 990));
}

function randomPrompt(): string {
  return randomIds().join(' ');
}

interface EngineMeasurement {
  batching: boolean;
  concurrency: number;
  tokensPerSecond: number;
  msPerToken: number;
  /** CPU time of this process (all threads) per generated token. */
  cpuMsPerToken: number;
  /** Mean sequences per decoder step. */
  meanBatch: number;
}

/** The scheduler alone: `concurrency` callers each generating one sequence after another. */
async function measureEngine(model: OnnxTransformer, batching: boolean, concurrency: number): Promise<EngineMeasurement> {
  let steps = 0;
  let stepped = 0;
  const scheduler = new GenerationScheduler(
    model,
    { maxBatch: batching ? 32 : 1, batchWindowMs: 3, maxQueue: 1000 },
    {
      queueChanged: () => {},
      stepped: (batchSize) => {
        steps++;
        stepped += batchSize;
      },
      firstToken: () => {},
      nextToken: () => {},
    },
  );
  let tokens = 0;
  const cpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (performance.now() < deadline) {
        await new Promise<void>((resolve, reject) =>
          scheduler.enqueue([
            {
              prompt: [SPECIAL_TOKENS.USER, ...randomIds(), SPECIAL_TOKENS.EOS],
              maxTokens: 64,
              sampler: new TokenSampler({ temperature: 0, topP: 1 }),
              onToken: () => {
                tokens++;
                return false;
              },
              onFinish: () => resolve(),
              onError: reject,
            },
          ]),
        );
      }
    }),
  );
  const ms = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    batching,
    concurrency,
    tokensPerSecond: (tokens / ms) * 1000,
    msPerToken: (ms / tokens) * concurrency,
    cpuMsPerToken: (cpu.user + cpu.system) / 1000 / tokens,
    meanBatch: stepped / steps,
  };
}

async function measure(url: string, batching: boolean, worker: boolean, concurrency: number): Promise<Measurement> {
  const latencies: number[] = [];
  const perToken: number[] = [];
  let tokens = 0;
  const sumBefore = await metric(url, 'model_server_time_per_output_token_seconds_sum');
  const countBefore = await metric(url, 'model_server_time_per_output_token_seconds_count');
  const cpuBefore = await metric(url, 'process_cpu_seconds_total');
  const batchSumBefore = await metric(url, 'model_server_batch_size_sum');
  const batchCountBefore = await metric(url, 'model_server_batch_size_count');
  const clientCpuBefore = process.cpuUsage();
  const started = performance.now();
  const deadline = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      const connection = new Connection(url);
      while (performance.now() < deadline) {
        const t0 = performance.now();
        const res = await connection.post(
          '/v1/chat/completions',
          JSON.stringify({ model: 'strata-tiny', messages: [{ role: 'user', content: randomPrompt() }], temperature: 0 }),
        );
        const body = JSON.parse(res.text) as { usage?: { completion_tokens: number } };
        if (res.status !== 200 || !body.usage) throw new Error(`request failed: ${res.status} ${res.text}`);
        const ms = performance.now() - t0;
        latencies.push(ms);
        perToken.push(ms / Math.max(1, body.usage.completion_tokens));
        tokens += body.usage.completion_tokens;
      }
      connection.close();
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  const clientCpu = process.cpuUsage(clientCpuBefore);
  const sum = (await metric(url, 'model_server_time_per_output_token_seconds_sum')) - sumBefore;
  const count = (await metric(url, 'model_server_time_per_output_token_seconds_count')) - countBefore;
  const cpuSeconds = (await metric(url, 'process_cpu_seconds_total')) - cpuBefore;
  const batchSum = (await metric(url, 'model_server_batch_size_sum')) - batchSumBefore;
  const batchCount = (await metric(url, 'model_server_batch_size_count')) - batchCountBefore;
  return {
    batching,
    worker,
    concurrency,
    requests: latencies.length,
    tokens,
    tokensPerSecond: tokens / elapsed,
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    msPerTokenE2E: percentile(perToken, 0.5),
    serverMsPerToken: (sum / count) * 1000,
    serverCpuMsPerToken: (cpuSeconds * 1000) / tokens,
    clientCpuMsPerRequest: (clientCpu.user + clientCpu.system) / 1000 / latencies.length,
    meanBatch: batchSum / batchCount,
  };
}

function percentile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

// The conditions, printed with the figures: on a shared machine other work changes them a lot.
const conditions = () => ({ date: new Date().toISOString(), cpus: os.cpus().length, loadAverage1m: Number(os.loadavg()[0]!.toFixed(2)) });
const startConditions = conditions();
console.log(
  `started ${startConditions.date} on ${startConditions.cpus} CPUs, load average ${startConditions.loadAverage1m} (1 min), ${SECONDS} s per ` +
    `measurement, ${args['prompt-tokens']} content ids per prompt`,
);

const engine: EngineMeasurement[] = [];
const model = await OnnxTransformer.load(DEFAULT_MODEL_DIR);
for (const batching of [true, false]) {
  await measureEngine(model, batching, 4); // warm-up
  for (const c of CONCURRENCY) {
    const m = await measureEngine(model, batching, c);
    engine.push(m);
    console.log(
      `engine batching ${batching ? 'on ' : 'off'} c=${String(c).padStart(2)}: ${m.tokensPerSecond.toFixed(0).padStart(6)} tokens/s, ` +
        `${m.msPerToken.toFixed(3)} ms per token per sequence, ${m.cpuMsPerToken.toFixed(3)} CPU-ms per token, mean batch ${m.meanBatch.toFixed(1)}`,
    );
  }
}
await model.release();
const engineAt = (batching: boolean, c: number) => engine.find((r) => r.batching === batching && r.concurrency === c)!;
const engineSpeedup = engineAt(true, 32).tokensPerSecond / engineAt(false, 32).tokensPerSecond;
const engineCpuGain = engineAt(false, 32).cpuMsPerToken / engineAt(true, 32).cpuMsPerToken;
console.log(`engine: batching speed-up at concurrency 32: ${engineSpeedup.toFixed(1)}x in tokens/s, ${engineCpuGain.toFixed(1)}x less CPU per token\n`);

const results: Measurement[] = [];
const rss: Record<string, number> = {};
const serverRuns = [
  { batching: true, worker: true, concurrency: CONCURRENCY, name: 'batching' },
  { batching: false, worker: true, concurrency: CONCURRENCY, name: 'noBatching' },
  { batching: true, worker: false, concurrency: [1, 32], name: 'batchingInThread' },
];
for (const run of serverRuns) {
  const { batching, worker } = run;
  const { child, url } = await startServer(batching, worker);
  try {
    await measure(url, batching, worker, 4); // warm-up
    for (const c of run.concurrency) {
      const m = await measure(url, batching, worker, c);
      results.push(m);
      console.log(
        `batching ${batching ? 'on ' : 'off'}${worker ? '' : ' (engine on the HTTP thread)'} c=${String(c).padStart(2)}: ` +
          `${m.tokensPerSecond.toFixed(0).padStart(6)} tokens/s, ` +
          `p50 ${m.p50Ms.toFixed(1)} ms, p99 ${m.p99Ms.toFixed(1)} ms per request, ` +
          `${m.msPerTokenE2E.toFixed(3)} ms/token end to end, ${m.serverMsPerToken.toFixed(3)} ms/token in the server, ` +
          `${m.serverCpuMsPerToken.toFixed(3)} server CPU-ms/token, ${m.clientCpuMsPerRequest.toFixed(2)} client CPU-ms/request, ` +
          `mean batch ${m.meanBatch.toFixed(1)} sequences per step`,
      );
    }
    rss[run.name] = (await metric(url, 'process_resident_memory_bytes')) / 2 ** 20;
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
}
const at = (batching: boolean, c: number, worker = true) => results.find((r) => r.batching === batching && r.worker === worker && r.concurrency === c)!;
const speedup = at(true, 32).tokensPerSecond / at(false, 32).tokensPerSecond;
const cpuGain = at(false, 32).serverCpuMsPerToken / at(true, 32).serverCpuMsPerToken;
console.log(`\nHTTP: batching speed-up at concurrency 32: ${speedup.toFixed(1)}x in tokens/s, ${cpuGain.toFixed(1)}x less server CPU per token`);
const inThreadSpeedup = at(true, 32, false).tokensPerSecond / at(false, 32).tokensPerSecond;
console.log(`engine on the HTTP thread (MODEL_SERVER_WORKER=false), batching on, c=32: ${inThreadSpeedup.toFixed(1)}x the unbatched tokens/s`);

// Alternating pairs at c=32 (see --pairs): both servers run, one is measured at a time.
const pairs: Array<{ on: number; off: number; ratio: number }> = [];
if (PAIRS > 0) {
  const servers = [await startServer(true, true), await startServer(false, true)];
  try {
    const [on, off] = [servers[0]!, servers[1]!];
    await measure(on.url, true, true, 4); // warm-up
    await measure(off.url, false, true, 4);
    for (let i = 0; i < PAIRS; i++) {
      const order = i % 2 === 0 ? [true, false] : [false, true];
      const tokensPerSecond: Record<string, number> = {};
      for (const batching of order) tokensPerSecond[String(batching)] = (await measure(batching ? on.url : off.url, batching, true, 32)).tokensPerSecond;
      const pair = { on: tokensPerSecond.true!, off: tokensPerSecond.false!, ratio: tokensPerSecond.true! / tokensPerSecond.false! };
      pairs.push(pair);
      console.log(
        `pair ${i + 1} at c=32 (${order[0] ? 'on first' : 'off first'}): batching on ${pair.on.toFixed(0)} vs off ${pair.off.toFixed(0)} tokens/s -> ` +
          `${pair.ratio.toFixed(2)}x`,
      );
    }
  } finally {
    for (const { child } of servers) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
  }
}
const pairsMedian =
  pairs.length > 0
    ? percentile(
        pairs.map((p) => p.ratio),
        0.5,
      )
    : undefined;
if (pairsMedian !== undefined)
  console.log(`HTTP: batching speed-up at concurrency 32, median of ${pairs.length} alternating pairs: ${pairsMedian.toFixed(2)}x (target >= 5x)`);
console.log(
  `server RSS after the runs: ${rss.batching!.toFixed(0)} MiB (batching on), ${rss.noBatching!.toFixed(0)} MiB (batching off), ` +
    `${rss.batchingInThread!.toFixed(0)} MiB (batching on, no worker)`,
);
const endConditions = conditions();
console.log(`finished ${endConditions.date}, load average ${endConditions.loadAverage1m} (1 min)`);
console.log(
  JSON.stringify(
    {
      started: startConditions,
      finished: endConditions,
      seconds: SECONDS,
      promptTokens: args['prompt-tokens'],
      engine,
      engineSpeedupAt32: engineSpeedup,
      engineCpuGainAt32: engineCpuGain,
      http: results,
      httpSpeedupAt32: speedup,
      httpCpuGainAt32: cpuGain,
      inThreadSpeedupAt32: inThreadSpeedup,
      pairsAt32: pairs,
      pairsMedianSpeedupAt32: pairsMedian,
      rssMiB: rss,
    },
    null,
    2,
  ),
);
