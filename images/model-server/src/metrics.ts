import { Counter, Gauge, Histogram, type Registry } from '../../service-kit/src/metrics.js';
import type { SchedulerObserver } from './generation-scheduler.js';

const TOKEN_RATE_WINDOW_MS = 10_000;

/** The model server's Prometheus metrics (beside the kit's HTTP and process metrics). */
export class ModelServerMetrics implements SchedulerObserver {
  readonly completions: Counter<'model' | 'outcome' | 'stream'>;
  readonly promptTokens: Counter<'model'>;
  readonly generatedTokens: Counter;
  private readonly queueDepth: Gauge;
  private readonly activeSequences: Gauge;
  private readonly timeToFirstToken: Histogram;
  private readonly timePerOutputToken: Histogram;
  private readonly batchSize: Histogram;
  private readonly stepDuration: Histogram;
  /** Time and tokens of each decode step over the last window (from `recentHead` on), for the tokens/s gauge. */
  private readonly recentTimes: number[] = [];
  private readonly recentTokens: number[] = [];
  private recentHead = 0;

  constructor(registry: Registry) {
    this.completions = new Counter({
      name: 'model_server_chat_completions_total',
      help: 'Chat completion requests by outcome (ok, invalid, not_found, rejected, error, cancelled)',
      labelNames: ['model', 'outcome', 'stream'] as const,
      registers: [registry],
    });
    this.promptTokens = new Counter({
      name: 'model_server_prompt_tokens_total',
      help: 'Prompt tokens encoded',
      labelNames: ['model'] as const,
      registers: [registry],
    });
    this.generatedTokens = new Counter({ name: 'model_server_generated_tokens_total', help: 'Tokens generated (EOS included)', registers: [registry] });
    const tokensInWindow = () => {
      this.dropOldSteps(performance.now());
      let tokens = 0;
      for (let i = this.recentHead; i < this.recentTokens.length; i++) tokens += this.recentTokens[i]!;
      return tokens;
    };
    new Gauge({
      name: 'model_server_tokens_per_second',
      help: `Tokens generated per second over the last ${TOKEN_RATE_WINDOW_MS / 1000} s`,
      registers: [registry],
      collect() {
        this.set(tokensInWindow() / (TOKEN_RATE_WINDOW_MS / 1000));
      },
    });
    this.queueDepth = new Gauge({ name: 'model_server_queue_depth', help: 'Sequences waiting for a batch slot', registers: [registry] });
    this.activeSequences = new Gauge({ name: 'model_server_active_sequences', help: 'Sequences being decoded', registers: [registry] });
    const latencyBuckets = [0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5];
    this.timeToFirstToken = new Histogram({
      name: 'model_server_time_to_first_token_seconds',
      help: 'From queueing a sequence to its first generated token',
      buckets: latencyBuckets,
      registers: [registry],
    });
    this.timePerOutputToken = new Histogram({
      name: 'model_server_time_per_output_token_seconds',
      help: 'Between consecutive generated tokens of one sequence',
      buckets: latencyBuckets,
      registers: [registry],
    });
    this.batchSize = new Histogram({
      name: 'model_server_batch_size',
      help: 'Sequences advanced together per decode step',
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers: [registry],
    });
    this.stepDuration = new Histogram({
      name: 'model_server_decode_step_seconds',
      help: 'Duration of one decoder run over the batch',
      buckets: latencyBuckets,
      registers: [registry],
    });
  }

  queueChanged(waiting: number, active: number): void {
    this.queueDepth.set(waiting);
    this.activeSequences.set(active);
  }

  stepped(batchSize: number, seconds: number): void {
    this.batchSize.observe(batchSize);
    this.stepDuration.observe(seconds);
    this.generatedTokens.inc(batchSize);
    const now = performance.now();
    this.recentTimes.push(now);
    this.recentTokens.push(batchSize);
    this.dropOldSteps(now);
  }

  /** Forget the steps older than the window (as they age, not only when /metrics is scraped). */
  private dropOldSteps(now: number): void {
    const times = this.recentTimes;
    while (this.recentHead < times.length && now - times[this.recentHead]! > TOKEN_RATE_WINDOW_MS) this.recentHead++;
    if (this.recentHead > 1024 && this.recentHead * 2 > times.length) {
      times.splice(0, this.recentHead);
      this.recentTokens.splice(0, this.recentHead);
      this.recentHead = 0;
    }
  }

  firstToken(seconds: number): void {
    this.timeToFirstToken.observe(seconds);
  }

  nextToken(seconds: number): void {
    this.timePerOutputToken.observe(seconds);
  }
}
