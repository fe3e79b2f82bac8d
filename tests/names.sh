#!/usr/bin/env bash
# libplugrl and a server's name: tests/c/hostile.c's cases dead-address and
# silent-dns, through the C API, under both of Go's resolvers.
#
#   names.sh BIN_DIR
#
# A robot reaches its trainer by name (trainer.local over mDNS, a DNS
# record), and a name can have an address that leads nowhere (a Docker
# bridge's, an unplugged cable's, a stale record's) or a name server that
# never answers. Each case runs in a mount namespace of its own (unshare
# -m, inside the script's network namespace, below) in which /etc/hosts
# maps trainer.test to 127.0.0.1 (where dead-address makes a listener
# that drops every SYN) and then 127.0.0.2 (where the server listens), /etc/resolv.conf names 127.0.0.2 as the only
# name server (which silent-dns binds and never answers), and
# /etc/nsswitch.conf looks in files, then DNS; the machine's own files are
# not touched. The case
# runs once with GODEBUG=netdns=go (Go's own resolver) and once with
# netdns=cgo (glibc's getaddrinfo, which Go uses where nsswitch.conf names
# mdns and the like). Nothing leaves the loopback interface.
#
# The server (plugrl-hostile slow-action --slow-every 2) holds every
# connection's second infer: dead-address interrupts it, and the reconnect
# that follows must try the server's address first. dead-address records
# a step ledger (PLUGRL_LEDGER), whose summary (`plugrl ledger summary`)
# must name 127.0.0.2, the address both connections went to.
#
# The whole script runs in a network namespace of its own (unshare -n,
# its loopback brought up with ip), server and cases: the machine's own
# loopback may have 127.0.0.1:PORT taken (the server's port, where
# dead-address binds) or a name server listening on 0.0.0.0:53 (dnsmasq,
# unbound: silent-dns could not bind 127.0.0.2:53), and neither can here.
#
# Needs root (network and mount namespaces): elsewhere it prints a
# SKIPPED line and exits 0.
set -uo pipefail
# shellcheck source=tests/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

if [[ $# -ne 1 ]]; then
  echo "usage: $0 BIN_DIR" >&2
  exit 2
fi
bin=$1
require_built "$bin" plugrl-hostile hostile plugrl

if [[ -z ${PLUGRL_NAMES_NETNS:-} ]]; then
  if ! command -v mount >/dev/null || ! command -v ip >/dev/null ||
    ! unshare -m -n --propagation private true 2>/dev/null; then
    echo "SKIPPED: names.sh: unshare -m -n is not permitted here (it needs root), or mount or ip is missing; the name cases need mount and network namespaces"
    exit 0
  fi
  PLUGRL_NAMES_NETNS=1 exec unshare -m -n --propagation private bash "$0" "$@"
fi
if ! ip link set lo up; then
  echo "$0: cannot bring up the network namespace's loopback interface" >&2
  exit 1
fi

tmp=$(mktemp -d)
pid=
trap '[[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
host=trainer.test # tests/c/hostile.c's NAMES_HOST
printf '127.0.0.1 localhost\n127.0.0.1 %s\n127.0.0.2 %s\n' "$host" "$host" >"$tmp/hosts"
printf 'nameserver 127.0.0.2\n' >"$tmp/resolv.conf"
printf 'hosts: files dns\n' >"$tmp/nsswitch.conf"

: >"$tmp/url"
"$bin/plugrl-hostile" --scenario slow-action --action-delay 60s --slow-every 2 --addr 127.0.0.2:0 >"$tmp/url" 2>"$tmp/server.err" &
pid=$!
if ! url=$(wait_url "$tmp/url" "$pid"); then
  echo "$0: plugrl-hostile printed no URL:" >&2
  cat "$tmp/url" "$tmp/server.err" >&2
  exit 1
fi

failed=0
for resolver in go cgo; do
  for c in dead-address silent-dns; do
    # silent-dns: no trainer.test in the hosts file, so that the name
    # server is asked.
    hosts=$tmp/hosts
    if [[ $c == silent-dns ]]; then
      grep -v "$host" "$tmp/hosts" >"$tmp/hosts.nameless"
      hosts=$tmp/hosts.nameless
    fi
    ledger=
    [[ $c == dead-address ]] && ledger=$tmp/$c-$resolver.ledger
    rc=0
    PLUGRL_LEDGER=$ledger timeout -k 5 60 unshare -m --propagation private sh -c '
      mount --bind "$1" /etc/hosts && mount --bind "$2" /etc/resolv.conf &&
        mount --bind "$3" /etc/nsswitch.conf || exit 3
      shift 3
      exec "$@"' sh "$hosts" "$tmp/resolv.conf" "$tmp/nsswitch.conf" \
      env GODEBUG="netdns=$resolver+2" "$bin/hostile" --case "$c" "$url" >"$tmp/out" 2>"$tmp/err" || rc=$?
    line=$(grep '^case=' "$tmp/out" | tail -n 1)
    [[ -n $line ]] || line="case=$c result=CRASH(rc=$rc)"
    echo "$line resolver=$resolver"
    # The resolver that looked the name up, as Go's debug output (the +2
    # above) names the lookup's order: "cgo" for glibc's getaddrinfo,
    # "files,dns" for Go's own, from this nsswitch.conf. A library built
    # without the cgo resolver would ignore netdns=cgo and pass its cases
    # with Go's, and a lookup made elsewhere would print nothing here.
    order=$(sed -n "s/^go package net: hostLookupOrder($host) = //p" "$tmp/err" | sort -u | paste -sd ' ')
    want_order=files,dns
    [[ $resolver == cgo ]] && want_order=cgo
    if [[ $order != "$want_order" ]]; then
      failed=1
      echo "---- $c ($resolver): $host was looked up in the order \"$order\", not \"$want_order\"" \
        "(Go's netdns=$resolver+2 debug output): not by the resolver this case is for" >&2
    fi
    if [[ $rc -ne 0 ]]; then
      failed=1
      [[ $rc -eq 3 ]] && echo "---- the namespace's bind mounts failed" >&2
      cat "$tmp/err" >&2
    else
      grep -v '^go package net: ' "$tmp/err" | sed "s/^/    /"
    fi
    if [[ $rc -eq 0 && -n $ledger ]]; then
      want="server addresses: 127.0.0.2:${url##*:} (2 connections)"
      if ! "$bin/plugrl" ledger summary "$ledger" >"$tmp/summary" 2>&1 || ! grep -qF "$want" "$tmp/summary"; then
        failed=1
        echo "---- $c ($resolver): the ledger's summary does not say \"$want\":" >&2
        cat "$tmp/summary" >&2
      fi
    fi
  done
done
exit "$failed"
