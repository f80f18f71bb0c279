import type { KubeClient, KubeObject } from '../support/kube-client.js';
import { MANAGED_SELECTOR } from '../support/ownership.js';
import type { OperatorSettings } from '../support/settings.js';
import { bundledPostgres, bundledRabbitmq } from './render-backing-services.js';
import { CNPG_CLUSTER, RABBITMQ_CLUSTER, type BackingProviders } from './render-operated-backing.js';
import { STACK } from './stack-names.js';

/**
 * The providers a stack runs on, as the stack's ConfigMap records them (rendered with it, so the
 * record is part of the world: lost with the stack, rebuilt from what exists).
 */
export const PROVIDERS_ANNOTATION = 'strata.dev/backing-providers';

/** The stack's data lives with a provider whose API is gone: fixed only by installing it again. */
export class BackingProviderMissingError extends Error {}

type Choice<K extends keyof BackingProviders> = {
  key: K;
  bundled: (s: OperatorSettings) => boolean;
  own: string;
  operated: BackingProviders[K];
  api: { apiVersion: string; kind: string };
};
const POSTGRES: Choice<'postgres'> = { key: 'postgres', bundled: bundledPostgres, own: STACK.postgres.name, operated: 'cloudnative-pg', api: CNPG_CLUSTER };
const RABBITMQ: Choice<'rabbitmq'> = {
  key: 'rabbitmq',
  bundled: bundledRabbitmq,
  own: STACK.rabbitmq.name,
  operated: 'rabbitmq-operator',
  api: RABBITMQ_CLUSTER,
};

/**
 * Who runs the namespace's bundled PostgreSQL and RabbitMQ, chosen once and kept (as the MinIO
 * operator and Rook keep a tenant's backing): the stack's own StatefulSet when it exists, else the
 * provider recorded on the stack's ConfigMap, else an operated cluster that exists; only a fresh
 * stack asks discovery. An operated provider whose API is no longer served is an error
 * (BackingProviderMissingError), never a silent switch to a new, empty StatefulSet.
 */
export async function keptBackingProviders(kube: KubeClient, settings: OperatorSettings, namespace: string): Promise<BackingProviders> {
  const own = new Set((await kube.list<KubeObject>('apps/v1', 'StatefulSet', namespace, MANAGED_SELECTOR)).map((s) => s.metadata.name));
  const config = await kube.get<KubeObject>({ apiVersion: 'v1', kind: 'ConfigMap', namespace, name: STACK.config });
  const recorded = parseRecord(config?.metadata.annotations?.[PROVIDERS_ANNOTATION]);
  const choose = async <K extends keyof BackingProviders>(c: Choice<K>): Promise<BackingProviders[K]> => {
    const statefulset = 'statefulset' as BackingProviders[K];
    if (!c.bundled(settings) || own.has(c.own)) return statefulset;
    const served = await kube.servesApi(c.api.apiVersion);
    const exists = served && (await kube.get({ ...c.api, namespace, name: c.own })) !== undefined;
    const chosen = (recorded?.[c.key] as BackingProviders[K] | undefined) ?? (exists || served ? c.operated : statefulset);
    if (chosen === c.operated && !served) {
      throw new BackingProviderMissingError(
        `the stack's ${c.key === 'postgres' ? 'PostgreSQL' : 'RabbitMQ'} is run by ${c.operated} (${c.api.kind} ${c.own}), whose API ` +
          `${c.api.apiVersion} is no longer served: install it again (the stack is not moved to a new, empty ${c.key === 'postgres' ? 'database' : 'broker'})`,
      );
    }
    return chosen;
  };
  return { postgres: await choose(POSTGRES), rabbitmq: await choose(RABBITMQ) };
}

/** The annotation's value for these providers. */
export function providersRecord(providers: BackingProviders): string {
  return JSON.stringify({ postgres: providers.postgres, rabbitmq: providers.rabbitmq });
}

function parseRecord(text: string | undefined): Partial<BackingProviders> | undefined {
  if (!text) return undefined;
  try {
    const parsed = JSON.parse(text) as Partial<BackingProviders>;
    return typeof parsed === 'object' && parsed !== null ? parsed : undefined;
  } catch {
    return undefined;
  }
}
