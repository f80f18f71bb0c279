#!/usr/bin/env bash
# The local servers the full test suite needs: PostgreSQL 127.0.0.1:5432, Redis 127.0.0.1:6379 and
# RabbitMQ 127.0.0.1:5672. Starts each one that is installed but not answering, waits for them, and
# says in one line what to install for those that are missing. Used by `npm test` (pretest) and
# .ci/run. Exits 0 even then: the tests that need a missing server fail and say so, the others run.
set -uo pipefail

pg_up() { pg_isready -h 127.0.0.1 -p 5432 -q 2>/dev/null; }
redis_up() { redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; }
rabbit_up() { (exec 3<>/dev/tcp/127.0.0.1/5672) 2>/dev/null && (exec 3<>/dev/tcp/127.0.0.1/15672) 2>/dev/null; }
# As root (CI) the servers start directly; as a user, through sudo when it needs no password.
as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

missing=()
if ! pg_up; then
  if command -v pg_ctlcluster >/dev/null && [ -d /etc/postgresql ]; then
    echo "local-services: starting PostgreSQL"
    as_root pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -1)" main start || true
  else
    missing+=(postgresql)
  fi
fi
if ! redis_up; then
  if command -v redis-server >/dev/null; then
    echo "local-services: starting Redis"
    as_root mkdir -p /var/lib/redis /var/log/redis
    as_root redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log || true
  else
    missing+=(redis-server redis-tools)
  fi
fi
if ! rabbit_up; then
  if command -v rabbitmq-server >/dev/null; then
    echo "local-services: starting RabbitMQ"
    as_root rabbitmq-server -detached || true
  else
    missing+=(rabbitmq-server)
  fi
fi

# RabbitMQ's management API (port 15672): the operator creates each namespace's user and vhost through
# it (test/controllers/broker-provisioner.test.ts). Enabling works on a running node or before it starts.
if ! (exec 3<>/dev/tcp/127.0.0.1/15672) 2>/dev/null && command -v rabbitmq-plugins >/dev/null; then
  as_root rabbitmq-plugins enable --offline rabbitmq_management >/dev/null 2>&1 || true
  as_root rabbitmq-plugins enable rabbitmq_management >/dev/null 2>&1 || true
fi

if [ ${#missing[@]} -gt 0 ]; then
  echo "local-services: not installed, the tests that need them will fail: apt-get install ${missing[*]}"
fi
# Wait (at most 60 s) for those that are installed: RabbitMQ takes seconds to open its port.
for _ in $(seq 1 60); do
  { pg_up || [[ " ${missing[*]} " == *" postgresql "* ]]; } &&
    { redis_up || [[ " ${missing[*]} " == *" redis-server "* ]]; } &&
    { rabbit_up || [[ " ${missing[*]} " == *" rabbitmq-server "* ]]; } && exit 0
  sleep 1
done
echo "local-services: still not answering after 60 s:$(pg_up || echo ' PostgreSQL')$(redis_up || echo ' Redis')$(rabbit_up || echo ' RabbitMQ')"
exit 0
