
wait_timeout=${PLBJAX_WAIT_TIMEOUT:-@TIMEOUT@}  # seconds a wait may last before the script stops
poll_seconds=${PLBJAX_POLL_SECONDS:-@POLL@}  # seconds between two looks at the cluster
start_at=${PLBJAX_START_AT:-1}  # the first step to issue: those before it are taken as issued
total=@TOTAL@
say() { printf '%s plbjax: %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >&2; }  # a line on stderr, with the UTC time
stop() { say "stopped: ${*:2}"; exit "$1"; }  # stop STATUS WHY
[[ $start_at =~ ^[0-9]+$ ]] || stop 2 "PLBJAX_START_AT=$start_at is not a step number"
command -v python3 >/dev/null || stop 2 "python3 is needed to read the cluster's answers"
@TOOL@
errors=$(mktemp)  # the last command's error output
trap 'rm -f "$errors"' EXIT
# the reader of the cluster's JSON: plbjax/sf/live/apply/expectations.py and export/script.py's read_cluster
IFS= read -r -d '' reader <<'PY' || true
@READER@
PY
what=() partition=() action=() src=() dst=() closure=() count=() confirmed=()
plan_step() {  # plan_step STEP WHAT PARTITION ACTION SOURCE TARGET CLOSURE COUNT: a row of the steps' table
  what[$1]=$2 partition[$1]=$3 action[$1]=$4 src[$1]=$5 dst[$1]=$6 closure[$1]=$7 count[$1]=$8
}
replicas() {  # replicas PARTITION: every page of its replica list
  local token='' page
  while :; do
    page=$(replica_page "$1" "$token") || { printf '%s\n' "$page" >&2 && return 1; }  # SF's error: on stderr
    printf '%s\n' "$page"
    [[ $page =~ \"[cC]ontinuation[tT]oken\"[[:space:]]*:[[:space:]]*\"([^\"]+)\" ]] || return 0
    token=${BASH_REMATCH[1]}
  done
}
fetch() {  # fetch PARTITION: its replica list into $pages, asking again while the cluster does not answer
  local deadline=$((SECONDS + wait_timeout))
  until pages=$(replicas "$1" 2>"$errors"); do
    ((SECONDS < deadline)) ||
      stop 3 "the cluster has not answered for $wait_timeout s (PLBJAX_WAIT_TIMEOUT): $(sf_error)"
    say "the cluster did not answer ($(sf_error)); asking again"
    sleep "$poll_seconds"
  done
}
read_as() { python3 -c "$reader" "$@" <<<"$pages"; }  # read_as MODE ARGS...: the reader on $pages
sf_error() { python3 -c "$reader" error <"$errors"; }  # the last command's error, in SF's words
confirm() {  # confirm STEP: the step is done, and so are the steps it needs
  local d
  confirmed[$1]=1
  for d in ${closure[$1]}; do confirmed[d]=1; done
}
recognise() {  # recognise 'STEP...': those of these steps (of one partition) already done, by a run before this one
  local k found args=()
  for k in $1; do args+=("$k" "${action[k]}" "${src[k]}" "${dst[k]}"); done
  fetch "${partition[args[0]]}"
  found=$(read_as survey "${args[@]}")
  for k in $found; do confirm "$k"; done
}
issue() {  # issue STEP COMMAND...: unless the step is done or before PLBJAX_START_AT, check and run its command
  local k=$1 out
  shift
  if [[ -z ${confirmed[k]-} ]] && ((k >= start_at)); then
    fetch "${partition[k]}"
    out=$(read_as step "${action[k]}" "${src[k]}" "${dst[k]}") ||
      stop 4 "step $k/$total (${what[k]}): the replica is not where the plan assumed: $out"
    [[ $out != done ]] || confirm "$k"
  fi
  if [[ -n ${confirmed[k]-} ]]; then
    say "step $k/$total already done, not issued: ${what[k]}"
  elif ((k < start_at)); then
    say "step $k/$total taken as issued (PLBJAX_START_AT=$start_at): ${what[k]}"
  else
    say "step $k/$total: ${what[k]}"
    "$@" >/dev/null 2>"$errors" || stop 4 "step $k/$total (${what[k]}) refused: $(sf_error)"
  fi
}
failover_step() {  # failover_step STEP: a step of the Failover Manager's, without a command
  if [[ -n ${confirmed[$1]-} ]]; then
    say "step $1/$total already done: ${what[$1]}"
  else
    say "step $1/$total left to the Failover Manager (no command): ${what[$1]}"
  fi
}
wait_for() {  # wait_for STEP NEEDED: before step STEP, poll until step NEEDED is done (unless known), or stop
  (($1 >= start_at)) && [[ -z ${confirmed[$1]-}${confirmed[$2]-} ]] || return 0
  await "$2" 0 "step $1 and those after it have not run"
}
await() {  # await STEP COUNT THEN: poll until step STEP is done, or stop (exit 3) saying THEN
  local k=$1 deadline=$((SECONDS + wait_timeout)) out
  while :; do
    fetch "${partition[k]}"
    if out=$(read_as done "${action[k]}" "${src[k]}" "${dst[k]}" "$2"); then
      confirm "$k"
      say "step $k/$total done${out:+ ($out)}: ${what[k]}"
      return
    fi
    ((SECONDS < deadline)) ||
      stop 3 "step $k (${what[k]}) is not done after $wait_timeout s (PLBJAX_WAIT_TIMEOUT): $out; $3"
    sleep "$poll_seconds"
  done
}
finish() {  # after the last step: wait for each step not confirmed yet, last first, then say all is done
  local k
  for ((k = total; k >= 1; k--)); do
    [[ -n ${confirmed[k]-} ]] || await "$k" "${count[k]}" "the steps before it may not be done either"
  done
  say "all $total step(s) done"
}
