#!/usr/bin/env bash
# Regenerates the vector files of testdata/compat/kafka/ with the real Kafka clients' own
# partitioners (see README.md). Run by hand from the repository root:
#   bash testdata/compat/kafka/gen.sh
# Needs gcc, Java 17 (javac), node/npm and Go. It installs librdkafka-dev and libslf4j-java with
# apt, kafkajs with npm (gen/js/package-lock.json) and franz-go and sarama from the Go module
# proxy (gen/go/go.mod).
#
# The Java client: kafka-clients 3.8.0 is compiled from the Apache Kafka sources at tag 3.8.0
# (clients/src/main/java, only the classes Gen.java reaches), since Maven Central could not be
# reached where the vectors were made. Give a checkout as KAFKA_SRC=/path/to/kafka, or let the
# script clone the tag.
set -euo pipefail
cd "$(dirname "$0")"
here=$(pwd)
keys=$here/../keys.txt

need_apt=()
[ -f /usr/include/librdkafka/rdkafka_mock.h ] || need_apt+=(librdkafka-dev)
[ -f /usr/share/java/slf4j-api.jar ] || need_apt+=(libslf4j-java)
if [ ${#need_apt[@]} -gt 0 ]; then
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rm -f ./*.txt

# librdkafka: direct calls, and produce on its mock cluster (127.0.0.1).
gcc -O2 -Wall -o "$work/gen-c" gen/c/gen.c -lrdkafka
rdver=$(dpkg-query -W -f='${Version}' librdkafka-dev)
"$work/gen-c" "$keys" . "librdkafka ${rdver%%-*} (Debian librdkafka-dev $rdver)"

# The Java client.
src=${KAFKA_SRC:-}
if [ -z "$src" ]; then
	git clone -q --depth 1 --branch 3.8.0 https://github.com/apache/kafka "$work/kafka"
	src=$work/kafka
fi
if [ -d "$src/.git" ] && [ "$(git -C "$src" describe --tags --exact-match 2>/dev/null)" != 3.8.0 ]; then
	echo "gen.sh: $src is not at tag 3.8.0" >&2
	exit 1
fi
mkdir -p "$work/classes"
javac -nowarn -d "$work/classes" -cp /usr/share/java/slf4j-api.jar \
	-sourcepath "$src/clients/src/main/java" gen/java/Gen.java
java -cp "$work/classes:/usr/share/java/slf4j-api.jar" Gen "$keys" . \
	"Apache Kafka Java client (kafka-clients) 3.8.0, compiled from the sources of tag 3.8.0" 2> >(grep -v '^SLF4J' >&2)

# franz-go and sarama.
go -C gen/go run . -keys "$keys" -out "$here"

# kafkajs.
(cd gen/js && npm ci --no-audit --no-fund >/dev/null)
node gen/js/gen.js "$keys" .
