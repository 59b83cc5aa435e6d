# Shared by the forwarding benchmarks (sourced, not run): the median of
# numbers on stdin, and one measurement between hosts $H1 and $H2 ($IP2)
# through whatever joins them now — TCP (iperf3, $SECS s, $REPS runs,
# median), 64-byte-frame UDP packet rate, ping RTT p50.

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2)? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

measure() { # prints: tcp_gbps udp_kpps rtt_p50_us tcp_runs(comma-separated)
  local tcp=() t
  for _ in $(seq "$REPS"); do
    ip netns exec "$H2" iperf3 -s -1 -D; sleep 0.3
    t=$(ip netns exec "$H1" iperf3 -c "$IP2" -t "$SECS" -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e9)')
    tcp+=("$t")
  done
  local tcp_med; tcp_med=$(printf '%s\n' "${tcp[@]}" | median)
  # 64-byte frames: 14 Ethernet + 20 IP + 8 UDP + 18 payload = 60 (+4 FCS).
  ip netns exec "$H2" iperf3 -s -1 -D; sleep 0.3
  local pps
  pps=$(ip netns exec "$H1" iperf3 -c "$IP2" -u -l 18 -b 0 -t 5 -J | python3 -c 'import json,sys; s=json.load(sys.stdin)["end"]["sum"]; print((s["packets"]-s["lost_packets"])/s["seconds"]/1e3)')
  local rtt
  rtt=$(ip netns exec "$H1" ping -c 300 -i 0.005 "$IP2" | sed -n 's/.*time=\([0-9.]*\) ms/\1/p' | awk '{print $1*1000}' | median)
  echo "$tcp_med $pps $rtt $(IFS=,; echo "${tcp[*]}")"
}
