import { standardLabels } from './ownership.js';

/**
 * Pod Security Standards "restricted": every pod and container of the operator's rendering runs as a
 * non-root user with the runtime's default seccomp profile, no privilege escalation and no capabilities.
 */
export function restrictedPodSecurity(uid: number, options: { fsGroup?: boolean } = {}) {
  return {
    runAsNonRoot: true,
    runAsUser: uid,
    runAsGroup: uid,
    ...(options.fsGroup === false ? {} : { fsGroup: uid }),
    seccompProfile: { type: 'RuntimeDefault' },
  };
}

export const RESTRICTED_CONTAINER_SECURITY = {
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  runAsNonRoot: true,
  seccompProfile: { type: 'RuntimeDefault' },
} as const;

/** The uid Strata's own images run as. */
export const SERVICE_UID = 10001;

/**
 * The pod template of a one-shot Job's pod: restarted on failure, restricted, its one container run as
 * `uid` (no fsGroup: it mounts no volume).
 */
export function oneShotPodTemplate(component: string, uid: number, container: { name: string; image: string; command: string[] } & Record<string, unknown>) {
  return {
    metadata: { labels: standardLabels(component, 'strata') },
    spec: {
      restartPolicy: 'OnFailure',
      securityContext: restrictedPodSecurity(uid, { fsGroup: false }),
      containers: [{ ...container, securityContext: RESTRICTED_CONTAINER_SECURITY }],
    },
  };
}
