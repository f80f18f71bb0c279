#!/usr/bin/env bash
# Runs ceph/s3-tests (test_s3.py + test_headers.py, every test id) against Ceph's radosgw 16.2 with the same
# client as run.sh, and stores each id's outcome in hack/s3-compat/radosgw-outcomes.json: report.py shows them
# beside Strata's in hack/docs/s3-compatibility.md. See hack/s3-compat/README.md.
#
#   S3TESTS_DIR=/path/to/s3-tests hack/s3-compat/run-radosgw.sh [extra pytest args: a partial run, outcomes file untouched]
#
# S3TESTS_DIR     checkout holding s3tests_boto3/ (never part of this repository)
# RGW_STANDALONE  the throw-away single-node Ceph script (default: shared/tools/rgw-standalone.sh beside the repository);
#                 needs apt-get install --no-install-recommends ceph-mon ceph-osd radosgw ceph-common
# RGW_DIR         its state directory (default: a fresh one in the temp dir); RGW_PORT (default 7480)
# PYTHON          as for run.sh (default /usr/bin/python3)
set -euo pipefail

# shellcheck source=hack/s3-compat/lib.sh
source "$(dirname "$0")/lib.sh"
rgw_script=${RGW_STANDALONE:-$repo/../shared/tools/rgw-standalone.sh}
work=$(mktemp -d "${TMPDIR:-/tmp}/s3compat-rgw.XXXXXX")
export DIR=${RGW_DIR:-$work/rgw} RGW_PORT=${RGW_PORT:-7480}
ceph_conf=(-c "$DIR/ceph.conf")

stop_rgw() { bash "$rgw_script" stop >/dev/null 2>&1 || true; }
trap stop_rgw EXIT

echo "starting radosgw on 127.0.0.1:$RGW_PORT (state in $DIR)"
bash "$rgw_script" start
# The settings teuthology gives the suite: SSE over plain HTTP, the built-in KMS with the suite's key ids
# testkey-1/testkey-2, lifecycle days of one second (run.sh's lc_debug_interval). Read at start: restart radosgw.
kms_keys="testkey-1=$(head -c 32 /dev/urandom | base64 -w0) testkey-2=$(head -c 32 /dev/urandom | base64 -w0)"
ceph "${ceph_conf[@]}" config set client.rgw.a rgw_crypt_require_ssl false
ceph "${ceph_conf[@]}" config set client.rgw.a rgw_crypt_s3_kms_backend testing
ceph "${ceph_conf[@]}" config set client.rgw.a rgw_crypt_s3_kms_encryption_keys "$kms_keys"
ceph "${ceph_conf[@]}" config set client.rgw.a rgw_lc_debug_interval 1
rgw_pid=$(cat "$DIR/run/client.rgw.a.pid")
kill "$rgw_pid"
for _ in $(seq 30); do kill -0 "$rgw_pid" 2>/dev/null || break; sleep 1; done
bash "$rgw_script" start

# The suite's users, with e-mail addresses for the grant tests.
create_user() {
  key[$1]=$(head -c 15 /dev/urandom | base32 | tr -dc 'A-Z0-9' | head -c 20)
  secret[$1]=$(head -c 30 /dev/urandom | base64 -w0 | tr -dc 'A-Za-z0-9' | head -c 40)
  bash "$rgw_script" users "${key[$1]}" "${secret[$1]}" "${name[$1]}" 2>/dev/null
  radosgw-admin "${ceph_conf[@]}" -n client.rgw.a user modify --uid="${name[$1]}" \
    --email="${email[$1]}" >/dev/null 2>&1
}
make_users create_user

write_s3tests_conf 127.0.0.1 "$RGW_PORT" False

results="$work/results.json"
# Ids that abort radosgw 16.2 (an assertion in RGWObjectCtx::set_atomic, on an UploadPartCopy from a key holding
# "%25"): every id after them would find no server. They are not run, and count as failed.
crashing=(s3tests_boto3/functional/test_s3.py::test_upload_part_copy_percent_encoded_key)
deselect=()
for id in "${crashing[@]}"; do deselect+=(--deselect "$id"); done
run_suite "$results" "s3compat_plugin s3compat_purge" "${deselect[@]}" "$@"

if [[ $# -gt 0 ]]; then
  echo "partial run: results in $results (hack/s3-compat/radosgw-outcomes.json untouched)"
else
  # One outcome per id, sorted: what report.py needs for the radosgw columns, small enough to keep in the repository.
  "$python" -c 'import json,sys; r={k: v["outcome"] for k, v in json.load(open(sys.argv[1])).items()}; r.update(dict.fromkeys(sys.argv[3:], "failed")); json.dump(dict(sorted(r.items())), open(sys.argv[2], "w"), indent=0, sort_keys=True); open(sys.argv[2], "a").write("\n")' \
    "$results" "$repo/hack/s3-compat/radosgw-outcomes.json" "${crashing[@]}"
  echo "results in $results; outcomes in hack/s3-compat/radosgw-outcomes.json"
fi
