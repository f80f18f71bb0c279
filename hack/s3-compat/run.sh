#!/usr/bin/env bash
# Runs ceph/s3-tests (test_s3.py + test_headers.py, every test id) against Strata and regenerates the
# compatibility table in hack/docs/s3-compatibility.md. See hack/s3-compat/README.md.
#
#   S3TESTS_DIR=/path/to/s3-tests hack/s3-compat/run.sh [extra pytest args, e.g. -k cors]
#
# S3TESTS_DIR          checkout holding s3tests_boto3/ (never part of this repository)
# S3COMPAT_ENDPOINT    use a running gateway (http://host:port) instead of starting `npm start`
# S3COMPAT_ROOT_USER / S3COMPAT_ROOT_PASSWORD   its root (default: the standalone defaults)
# S3COMPAT_PORT        first of six free ports for the standalone it starts (default 19500)
# S3COMPAT_OBJECT_OWNERSHIP  the standalone's STRATA_DEFAULT_OBJECT_OWNERSHIP: ObjectWriter (default, as radosgw: the
#                      suite's ACL tests make buckets without x-amz-object-ownership), BucketOwnerPreferred, or
#                      BucketOwnerEnforced (S3's and Strata's own default)
# PYTHON               interpreter with boto3, pytest, munch, isodate, pytz, dateutil, pytest-mock, pytest-timeout
#                      (Debian: python3-boto3 python3-pytest python3-munch python3-isodate python3-tz
#                      python3-dateutil python3-pytest-mock python3-pytest-timeout; default /usr/bin/python3)
# Extra pytest args make a partial run: its results are printed, the table is left alone.
set -euo pipefail

# shellcheck source=hack/s3-compat/lib.sh
source "$(dirname "$0")/lib.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/s3compat.XXXXXX")
root_user=${S3COMPAT_ROOT_USER:-strata}
root_password=${S3COMPAT_ROOT_PASSWORD:-strata-secret-key}
object_ownership=${S3COMPAT_OBJECT_OWNERSHIP:-ObjectWriter}
server_pid=

stop_server() {
  if [[ -n "$server_pid" ]]; then
    # The standalone was started in its own session: end that process group, which is ours alone.
    kill -TERM -- "-$server_pid" 2>/dev/null || true
    for _ in $(seq 1 60); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$server_pid" 2>/dev/null || true
  fi
}
trap stop_server EXIT

if [[ -n "${S3COMPAT_ENDPOINT:-}" ]]; then
  endpoint=$S3COMPAT_ENDPOINT
else
  port=${S3COMPAT_PORT:-19500}
  endpoint="http://127.0.0.1:$port"
  mkdir -p "$work/data"
  echo "starting the standalone platform on $endpoint (data in $work/data, log in $work/strata.log, new buckets $object_ownership)"
  # The suite's bucket-logging tests wait 5.5 s (radosgw's ObjectRollTime 5 s) for the log objects: Strata writes
  # them 2 s after their first line. The suite's SSE-KMS tests use the key ids testkey-1 and testkey-2 (s3tests.conf's defaults): a fresh pair per run.
  kms_keys="testkey-1:$(head -c 32 /dev/urandom | base64 -w0),testkey-2:$(head -c 32 /dev/urandom | base64 -w0)"
  (
    cd "$repo"
    exec setsid env STRATA_DATA_DIR="$work/data" STRATA_HOST=127.0.0.1 \
      STRATA_GATEWAY_PORT="$port" STRATA_DATA_PLANE_PORT=$((port + 1)) STRATA_CONTROL_PLANE_PORT=$((port + 2)) \
      STRATA_MODEL_SERVER_PORT=$((port + 3)) STRATA_POEM_APP_PORT=$((port + 4)) STRATA_IMAGE_SEARCH_PORT=$((port + 5)) \
      STRATA_DISABLED_SERVICES=model-server,poem-app,image-search STRATA_PURGE_SCHEDULE=off \
      STRATA_ROOT_USER="$root_user" STRATA_ROOT_PASSWORD="$root_password" STRATA_SSE_KMS_KEYS="$kms_keys" \
      STRATA_DEFAULT_OBJECT_OWNERSHIP="$object_ownership" STRATA_ACCESS_LOG_FLUSH_MS=2000 LOG_LEVEL=warn \
      npm start
  ) >"$work/strata.log" 2>&1 &
  server_pid=$!
  for i in $(seq 1 240); do
    curl -sf "$endpoint/readyz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { cat "$work/strata.log"; echo "the standalone platform exited" >&2; exit 1; }
    [[ $i == 240 ]] && { tail -50 "$work/strata.log"; echo "the standalone platform is not ready after 120 s" >&2; exit 1; }
    sleep 0.5
  done
fi

# The suite's users, made by the root through the admin API, each with its e-mail address.
token=$(curl -sf -X POST "$endpoint/login" -H 'content-type: application/json' \
  -d "{\"username\":\"$root_user\",\"password\":\"$root_password\"}" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["token"])')
create_user() {
  local answer
  answer=$(curl -sf -X POST "$endpoint/admin/users" -H "Authorization: Bearer $token" -H 'content-type: application/json' \
    -d "{\"username\":\"${name[$1]}\",\"password\":\"${name[$1]}-password\",\"email\":\"${email[$1]}\"}")
  key[$1]=$(echo "$answer" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["accessKey"])')
  secret[$1]=$(echo "$answer" | "$python" -c 'import json,sys; print(json.load(sys.stdin)["data"]["secretKey"])')
}
make_users create_user

host=$(echo "$endpoint" | sed -E 's#^https?://([^:/]+).*#\1#')
port_of=$(echo "$endpoint" | sed -E 's#^https?://[^:/]+:?([0-9]*).*#\1#')
secure=False; [[ $endpoint == https://* ]] && secure=True
write_s3tests_conf "$host" "${port_of:-80}" "$secure"

results="$work/results.json"
run_suite "$results" s3compat_plugin "$@"

if [[ $# -gt 0 ]]; then
  "$python" "$repo/hack/s3-compat/report.py" "$results" "$work/partial.md" "$work/failures.txt" >"$work/report.txt"
  grep -v '^|' "$work/report.txt" | head -60
  echo "partial run: results in $work/results.json, failures in $work/failures.txt"
else
  "$python" "$repo/hack/s3-compat/report.py" "$results" "$repo/hack/docs/s3-compatibility.md" "$work/failures.txt"
  echo "results in $work/results.json, failures in $work/failures.txt"
fi
