/* lmwhere: where a libmemcached client finds each key.
 *
 *   lmwhere CONFIG [ketama-weighted] < keys
 *
 * Builds a client with memcached(CONFIG) (libmemcached's configuration string, such as
 * "--SERVER=127.0.0.1:24101 --SERVER=127.0.0.1:24102 --DISTRIBUTION=consistent --HASH=MD5"),
 * then, with the argument ketama-weighted, sets MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED. Reads
 * keys in hex, one a line, and for each prints one line:
 *
 *   HEXKEY HOST:PORT VALUE       the server memcached_server_by_key names, and what
 *                                memcached_get found there ("-" for nothing)
 *
 * Built and run by memcached_test.go; our own code, written against libmemcached 1.1's
 * public API (include/libmemcached-1.0/). */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unhex(const char *s, size_t n, char *out) {
	for (size_t i = 0; i + 1 < n; i += 2) {
		unsigned v;
		if (sscanf(s + i, "%2x", &v) != 1) return -1;
		out[i / 2] = (char)v;
	}
	return (int)(n / 2);
}

int main(int argc, char **argv) {
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: lmwhere CONFIG [ketama-weighted] < keys\n");
		return 2;
	}
	memcached_st *memc = memcached(argv[1], strlen(argv[1]));
	if (memc == NULL) {
		fprintf(stderr, "lmwhere: memcached() refused the configuration string\n");
		return 1;
	}
	if (argc == 3) {
		if (strcmp(argv[2], "ketama-weighted") != 0) {
			fprintf(stderr, "lmwhere: unknown argument %s\n", argv[2]);
			return 2;
		}
		memcached_return_t rc = memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED, 1);
		if (rc != MEMCACHED_SUCCESS) {
			fprintf(stderr, "lmwhere: KETAMA_WEIGHTED: %s\n", memcached_strerror(memc, rc));
			return 1;
		}
	}
	char line[1024], key[512];
	while (fgets(line, sizeof line, stdin) != NULL) {
		size_t n = strcspn(line, "\r\n");
		line[n] = '\0';
		int klen = unhex(line, n, key);
		if (klen <= 0) {
			fprintf(stderr, "lmwhere: bad key line %s\n", line);
			return 1;
		}
		memcached_return_t rc;
		const memcached_instance_st *srv = memcached_server_by_key(memc, key, (size_t)klen, &rc);
		if (srv == NULL) {
			fprintf(stderr, "lmwhere: memcached_server_by_key: %s\n", memcached_strerror(memc, rc));
			return 1;
		}
		size_t vlen = 0;
		uint32_t flags = 0;
		char *v = memcached_get(memc, key, (size_t)klen, &vlen, &flags, &rc);
		printf("%s %s:%u %.*s\n", line, memcached_server_name(srv), (unsigned)memcached_server_port(srv),
			v != NULL ? (int)vlen : 1, v != NULL ? v : "-");
		free(v);
	}
	memcached_free(memc);
	return 0;
}
