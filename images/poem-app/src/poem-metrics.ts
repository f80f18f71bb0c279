import { Histogram, registeredCounter, type Counter, type Registry } from '../../service-kit/src/index.js';

export type GenerationOutcome = 'ok' | 'timeout' | 'unavailable' | 'upstream_error' | 'empty';

/** The poem app's own metrics, beside the kit's HTTP and process metrics. */
export class PoemMetrics {
  readonly generations: Counter<'type' | 'outcome'>;
  readonly generationSeconds: Histogram<'outcome'>;
  readonly saved: Counter<'type'>;
  readonly deleted: Counter;

  constructor(registry: Registry) {
    this.generations = registeredCounter(registry, 'poem_generations_total', 'Poem generations attempted, by poem type code and outcome', ['type', 'outcome']);
    this.generationSeconds = new Histogram({
      name: 'poem_generation_duration_seconds',
      help: 'Time spent waiting for the upstream model per generation, by outcome',
      labelNames: ['outcome'] as const,
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60],
      registers: [registry],
    });
    this.saved = registeredCounter(registry, 'poems_saved_total', 'Poems saved to history, by poem type label', ['type']);
    this.deleted = registeredCounter(registry, 'poems_deleted_total', 'Poems deleted from history');
  }
}
