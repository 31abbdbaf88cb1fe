command -v sfctl >/dev/null || stop 2 "sfctl is needed (pip install sfctl; sfctl cluster select)"
replica_page() { sfctl replica list --partition-id "$1" ${2:+--continuation-token "$2"}; }  # PARTITION TOKEN
