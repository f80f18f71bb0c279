import type { OperatorSettings } from './settings.js';

/**
 * The third-party images the stacks run, pinned to exact versions (a tag that names one release,
 * never a moving one such as `16` or `latest`), so that every stack runs what was tested. RabbitMQ is
 * on 4.1 (3.13 is out of community support; a 3.13 node with its stable feature flags enabled, the
 * default of a fresh node, upgrades to 4.1 in place).
 */
export const THIRD_PARTY_IMAGES = {
  postgres: 'postgres:16.4',
  rabbitmq: 'rabbitmq:4.1.4',
  redis: 'redis:7.2.5-alpine',
} as const;

/** Where they come from unless the administrator names a mirror (Docker Hub's official images). */
export const DEFAULT_THIRD_PARTY_REGISTRY = 'docker.io/library/';

/**
 * A third-party image as the stack pulls it: from `settings.thirdPartyRegistry` when set (a private
 * registry or pull-through mirror holding the same repositories, e.g. "registry.example.com/mirror/"),
 * else from Docker Hub.
 */
export function thirdPartyImage(settings: Pick<OperatorSettings, 'thirdPartyRegistry'>, name: keyof typeof THIRD_PARTY_IMAGES): string {
  const registry = settings.thirdPartyRegistry || DEFAULT_THIRD_PARTY_REGISTRY;
  return `${registry.endsWith('/') ? registry : `${registry}/`}${THIRD_PARTY_IMAGES[name]}`;
}
