command -v curl >/dev/null || stop 2 "curl is needed"
endpoint=${PLBJAX_ENDPOINT:-}
[[ -n $endpoint ]] || stop 2 "set PLBJAX_ENDPOINT to the HTTP endpoint of the cluster, e.g. https://mycluster:19080"
read -r -a curl_args <<<"${PLBJAX_CURL_ARGS-}"  # e.g. --cert client.pem --key client.key
request() { curl --silent --show-error --fail-with-body ${curl_args[@]+"${curl_args[@]}"} "$@"; }
post() { request -X POST --data '' "$endpoint$1" >&2; }  # a move; SF's answer (an error) on stderr
replica_page() {  # replica_page PARTITION TOKEN: a page of its replica list
  request -G --data-urlencode api-version=6.0 ${2:+--data-urlencode "ContinuationToken=$2"} \
    "$endpoint/Partitions/$1/\$/GetReplicas"
}
