#!/usr/bin/env bash
# Prepares the Java column of the conformance suite: the reference release (../shared/reference)
# runs on Java 17 with Debian's netty 4.1 jars standing in for its missing netty-all jar
# (../shared/reference/run-java.sh lists the jars it puts on the class path).
#
#   tests/conformance/setup-java.sh
#
# Idempotent: when every jar is there (and javac runs), it does nothing. Otherwise, as root with
# apt-get, it installs Debian's libnetty-java; anyone else is told the one command to run.
set -euo pipefail
JARS="common buffer codec handler transport resolver transport-native-epoll transport-native-unix-common codec-http codec-socks handler-proxy"

missing() {
  for m in $JARS; do [ -f "/usr/share/java/netty-$m.jar" ] || return 0; done
  return 1
}

command -v javac >/dev/null || { echo "setup-java: no javac: the conformance suite needs a JDK 17" >&2; exit 1; }
if ! missing; then
  echo "setup-java: netty jars present"
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "setup-java: installing Debian's libnetty-java"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q libnetty-java >/dev/null
fi
if missing; then
  echo "setup-java: Debian's netty jars are missing (/usr/share/java/netty-*.jar): run 'apt-get install -y libnetty-java' as root" >&2
  exit 1
fi
echo "setup-java: libnetty-java installed"
