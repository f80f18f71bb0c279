# What run.sh and run-radosgw.sh share: the suite's checkout and interpreter, its configuration file and its run.
# Sourced (not run) after `set -euo pipefail`; the caller sets `work` (its temp dir) and makes the suite's users
# with make_users.

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
: "${S3TESTS_DIR:?set S3TESTS_DIR to a ceph/s3-tests checkout}"
S3TESTS_DIR=$(cd "$S3TESTS_DIR" && pwd)
python=${PYTHON:-/usr/bin/python3}

# make_users CREATE: the suite's users main and alt (two accounts for the ACL tests) and tenant, each named in
# `name` (s3<who><time>) with the e-mail address in `email` (the suite's grants by e-mail name it);
# `CREATE WHO` makes the user ${name[WHO]} with the address ${email[WHO]} and sets its `key` and `secret`.
declare -A key secret name email
make_users() {
  local who suffix
  suffix=$(date +%s)
  for who in main alt tenant; do
    name[$who]="s3$who$suffix"
    email[$who]="${name[$who]}@example.com"
    "$1" "$who"
  done
}

# section HEADER WHO: a section [HEADER] naming user WHO (its ids, e-mail address and keys).
section() {
  printf '[%s]\ndisplay_name = %s\nuser_id = %s\nemail = %s\naccess_key = %s\nsecret_key = %s\n' \
    "$1" "${name[$2]}" "${name[$2]}" "${email[$2]}" "${key[$2]}" "${secret[$2]}"
}

# user_section WHO: the [s3 WHO] section's lines every user has.
user_section() { section "s3 $1" "$1"; }

# iam_section SECTION WHO: an IAM section the suite's __init__.py reads unconditionally ([iam], [iam root],
# [iam alt root]). Neither server offers IAM accounts, so they name an existing user: the ids that call the IAM
# API fail on both, the few that only sign S3 requests with these keys act as that user.
iam_section() { section "$1" "$2"; }

# write_s3tests_conf HOST PORT IS_SECURE: $work/s3tests.conf for the server there and the three users.
write_s3tests_conf() {
  cat >"$work/s3tests.conf" <<CONF
[DEFAULT]
host = $1
port = $2
is_secure = $3
ssl_verify = False

[fixtures]
bucket prefix = s3t-{random}-

$(user_section main)
api_name = us-east-1
lc_debug_interval = 1

$(user_section alt)

$(user_section tenant)
tenant = ${name[tenant]}

$(iam_section iam alt)

$(iam_section 'iam root' tenant)

$(iam_section 'iam alt root' tenant)
CONF
}

# run_suite RESULTS PLUGINS [pytest args...]: the suite's two files (every id, or what the args select) with the
# pytest plugins named in PLUGINS (space-separated, from this folder), each id's outcome recorded in RESULTS.
# Its last lines are printed; failing ids do not stop the caller.
run_suite() {
  local results=$1 plugin plugins=()
  for plugin in $2; do plugins+=(-p "$plugin"); done
  shift 2
  set +e
  (
    cd "$S3TESTS_DIR"
    S3TEST_CONF="$work/s3tests.conf" S3COMPAT_RESULTS="$results" PYTHONPATH="$repo/hack/s3-compat${PYTHONPATH:+:$PYTHONPATH}" \
      "$python" -m pytest "${plugins[@]}" -p no:cacheprovider -q --timeout=300 -rN --tb=no \
      s3tests_boto3/functional/test_s3.py s3tests_boto3/functional/test_headers.py "$@"
  ) | tail -5
  set -e
}
