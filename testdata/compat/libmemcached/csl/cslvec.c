/*
 * cslvec: golden placements of libmemcached's configuration string (memcached(3), the
 * language of src/libmemcached/csl/), from the real Debian libmemcached 1.1.4.
 *
 *   cslvec vectors KEYS FILE.csl   memcached(text) and, for every key of KEYS,
 *                                  memcached_generate_hash: the vector file on stdout
 *   cslvec refuse FILE.csl         libmemcached_check_configuration's answer
 *
 * No server is contacted: memcached_generate_hash runs the client's hash and continuum,
 * which ../README.md shows names the server memcached_set stores each key on.
 */
#include <libmemcached/memcached.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *m) {
  fprintf(stderr, "cslvec: %s\n", m);
  exit(1);
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) die(path);
  char *buf = malloc(1 << 20);
  *len = fread(buf, 1, (1 << 20) - 1, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

static int hexval(int c) {
  return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "refuse") == 0) {
    size_t len;
    char *text = slurp(argv[2], &len);
    char err[2048] = "";
    memcached_return_t rc = libmemcached_check_configuration(text, len, err, sizeof err);
    memcached_st *memc = memcached(text, len);
    const char *msg = err;
    if (msg[0] == '(' && strstr(msg, ") ")) msg = strstr(msg, ") ") + 2; /* drop a pointer */
    printf("libmemcached_check_configuration: %s | %s\n", memcached_strerror(NULL, rc), msg);
    printf("memcached(): %s\n", memc ? "a client" : "NULL");
    return 0;
  }
  if (argc != 4 || strcmp(argv[1], "vectors") != 0) die("usage: cslvec vectors KEYS FILE.csl | cslvec refuse FILE.csl");
  size_t len;
  char *text = slurp(argv[3], &len);
  memcached_st *memc = memcached(text, len);
  if (!memc) die("memcached() refused the configuration");
  uint32_t n = memcached_server_count(memc);
  if (n == 0) die("no servers");
  const char *base = strrchr(argv[3], '/') ? strrchr(argv[3], '/') + 1 : argv[3];
  printf("# system: libmemcached %s (Debian libmemcached11), configuration string csl/%s\n", LIBMEMCACHED_VERSION_STRING, base);
  printf("# front door: memcached(3) builds the client from the string; memcached_generate_hash names each key's server (no server contacted)\n");
  printf("# servers:");
  for (uint32_t i = 0; i < n; i++) {
    const memcached_instance_st *in = memcached_server_instance_by_position(memc, i);
    if (memcached_server_port(in) == 0)
      printf(" %u=%s", i, memcached_server_name(in));
    else
      printf(" %u=%s:%u", i, memcached_server_name(in), (unsigned) memcached_server_port(in));
  }
  printf("\n# server order: the client's own (memcached_server_instance_by_position), sorted with --SORT-HOSTS\n");
  FILE *kf = fopen(argv[2], "r");
  if (!kf) die(argv[2]);
  static char line[65536], key[32768];
  int k = 0;
  char body[1 << 20];
  size_t used = 0;
  while (fgets(line, sizeof line, kf)) {
    size_t l = strcspn(line, "\r\n");
    line[l] = 0;
    if (l == 0 || line[0] == '#') continue;
    size_t kl = 0;
    if (strcmp(line, "-") != 0)
      for (size_t i = 0; i + 1 < l; i += 2) key[kl++] = (char) (hexval(line[i]) << 4 | hexval(line[i + 1]));
    uint32_t s = memcached_generate_hash(memc, key, kl);
    used += (size_t) snprintf(body + used, sizeof body - used, "%d %u\n", k, s);
    k++;
  }
  printf("# keys: %d of %d carried\n%s", k, k, body);
  memcached_free(memc);
  return 0;
}
