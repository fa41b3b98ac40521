/*
 * lmvec: golden placement vectors from the real libmemcached (Debian libmemcached 1.1.4).
 *
 *   lmvec vectors SYSTEM KEYS CONF   writes the vector file of CONF to stdout
 *   lmvec refuse CONF                applies CONF step by step and prints what
 *                                    libmemcached answers to each step
 *
 * A .conf file is the sequence of libmemcached calls that configures one client,
 * applied in file order (order matters to libmemcached: see the README):
 *
 *   behavior NAME VALUE   memcached_behavior_set(memc, MEMCACHED_BEHAVIOR_<NAME>, VALUE);
 *                         VALUE is a number, a MEMCACHED_DISTRIBUTION_ suffix or a
 *                         MEMCACHED_HASH_ suffix
 *   server HOST PORT W    memcached_server_add_with_weight(memc, HOST, PORT, W)
 *   servers LIST          memcached_server_push(memc, memcached_servers_parse(LIST));
 *                         LIST is the rest of the line
 *   namespace PREFIX      memcached_callback_set(memc, MEMCACHED_CALLBACK_NAMESPACE, PREFIX)
 *
 * The front door: every key the client accepts is stored with memcached_set through
 * the configured client (text protocol, or the binary protocol for keys with a space,
 * which the text protocol cannot carry), then every memcached server is read on its
 * own (a one-server client, binary protocol) to find the one server that holds the
 * key with this configuration's value. memcached_generate_hash and
 * memcached_server_by_key must agree with what the servers hold, or lmvec fails.
 * Keys memcached_set refuses (empty, over 250 bytes) are placed with
 * memcached_generate_hash, which runs the same hash and continuum without the key
 * check, and are listed in the header.
 */
#include <ctype.h>
#include <errno.h>
#include <libmemcached/memcached.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_SERVERS = 64, MAX_KEYS = 4096, MAX_LINE = 4096 };

struct entry {
  char host[MEMCACHED_NI_MAXHOST];
  in_port_t port;
  uint32_t weight;
};

struct config {
  struct entry servers[MAX_SERVERS];
  int n;
  char namespace_[256];
};

struct key {
  char *bytes;
  size_t len;
};

static void die(const char *format, ...) {
  va_list ap;
  va_start(ap, format);
  fputs("lmvec: ", stderr);
  vfprintf(stderr, format, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

struct name_value {
  const char *name;
  uint64_t value;
};

static const struct name_value behaviors[] = {
    {"DISTRIBUTION", MEMCACHED_BEHAVIOR_DISTRIBUTION},
    {"HASH", MEMCACHED_BEHAVIOR_HASH},
    {"KETAMA", MEMCACHED_BEHAVIOR_KETAMA},
    {"KETAMA_WEIGHTED", MEMCACHED_BEHAVIOR_KETAMA_WEIGHTED},
    {"KETAMA_HASH", MEMCACHED_BEHAVIOR_KETAMA_HASH},
    {"SORT_HOSTS", MEMCACHED_BEHAVIOR_SORT_HOSTS},
    {"VERIFY_KEY", MEMCACHED_BEHAVIOR_VERIFY_KEY},
    {"BINARY_PROTOCOL", MEMCACHED_BEHAVIOR_BINARY_PROTOCOL},
    {"HASH_WITH_PREFIX_KEY", MEMCACHED_BEHAVIOR_HASH_WITH_PREFIX_KEY},
    {NULL, 0},
};

static const struct name_value values[] = {
    {"MODULA", MEMCACHED_DISTRIBUTION_MODULA},
    {"CONSISTENT", MEMCACHED_DISTRIBUTION_CONSISTENT},
    {"CONSISTENT_KETAMA", MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA},
    {"RANDOM", MEMCACHED_DISTRIBUTION_RANDOM},
    {"CONSISTENT_KETAMA_SPY", MEMCACHED_DISTRIBUTION_CONSISTENT_KETAMA_SPY},
    {"CONSISTENT_WEIGHTED", MEMCACHED_DISTRIBUTION_CONSISTENT_WEIGHTED},
    {"DEFAULT", MEMCACHED_HASH_DEFAULT},
    {"MD5", MEMCACHED_HASH_MD5},
    {"CRC", MEMCACHED_HASH_CRC},
    {"FNV1_64", MEMCACHED_HASH_FNV1_64},
    {"FNV1A_64", MEMCACHED_HASH_FNV1A_64},
    {"FNV1_32", MEMCACHED_HASH_FNV1_32},
    {"FNV1A_32", MEMCACHED_HASH_FNV1A_32},
    {"HSIEH", MEMCACHED_HASH_HSIEH},
    {"MURMUR", MEMCACHED_HASH_MURMUR},
    {"JENKINS", MEMCACHED_HASH_JENKINS},
    {"MURMUR3", MEMCACHED_HASH_MURMUR3},
    {NULL, 0},
};

static int lookup(const struct name_value *table, const char *name, uint64_t *out) {
  for (int i = 0; table[i].name; i++) {
    if (strcmp(table[i].name, name) == 0) {
      *out = table[i].value;
      return 1;
    }
  }
  char *end;
  errno = 0;
  unsigned long long v = strtoull(name, &end, 10);
  if (*name && *end == 0 && errno == 0) {
    *out = v;
    return 1;
  }
  return 0;
}

static char *trim(char *s) {
  while (isspace((unsigned char) *s)) s++;
  size_t n = strlen(s);
  while (n > 0 && isspace((unsigned char) s[n - 1])) s[--n] = 0;
  return s;
}

/* last_error drops the pointer libmemcached prints in its messages, which changes from run to run. */
static const char *last_error(memcached_st *memc) {
  static char buf[1024];
  const char *m = memcached_last_error_message(memc);
  if (m[0] == '(') {
    const char *close = strstr(m, ") ");
    if (close) m = close + 2;
  }
  snprintf(buf, sizeof buf, "%s", m);
  return buf;
}

/* One step's outcome, for the refuse mode and for failing loudly in the vectors mode. */
static void report(int verbose, int lineno, const char *line, memcached_st *memc,
                   memcached_return_t rc) {
  if (verbose) {
    printf("line %d: %s\n  -> %s", lineno, line, memcached_strerror(memc, rc));
    if (memcached_failed(rc)) printf(" | %s", last_error(memc));
    printf("\n");
  } else if (memcached_failed(rc)) {
    die("line %d: %s: %s | %s", lineno, line, memcached_strerror(memc, rc), last_error(memc));
  }
}

/* build applies the calls of CONF to a new client. With verbose, each call and its
 * answer is printed and failures do not stop the run. */
static memcached_st *build(const char *path, struct config *cfg, int verbose) {
  FILE *f = fopen(path, "r");
  if (!f) die("%s: %s", path, strerror(errno));
  memcached_st *memc = memcached_create(NULL);
  if (!memc) die("memcached_create failed");
  memset(cfg, 0, sizeof *cfg);
  char buf[MAX_LINE];
  int lineno = 0;
  while (fgets(buf, sizeof buf, f)) {
    lineno++;
    char *line = trim(buf);
    if (*line == 0 || *line == '#') continue;
    char verb[64] = "";
    int off = 0;
    sscanf(line, "%63s %n", verb, &off);
    char *rest = line + off;
    memcached_return_t rc = MEMCACHED_SUCCESS;
    if (strcmp(verb, "behavior") == 0) {
      char name[64], value[64];
      uint64_t b, v;
      if (sscanf(rest, "%63s %63s", name, value) != 2 || !lookup(behaviors, name, &b)
          || !lookup(values, value, &v))
        die("%s:%d: bad behavior line: %s", path, lineno, line);
      rc = memcached_behavior_set(memc, (memcached_behavior_t) b, v);
    } else if (strcmp(verb, "server") == 0) {
      char host[2048];
      unsigned port;
      unsigned long weight;
      if (sscanf(rest, "%2047s %u %lu", host, &port, &weight) != 3)
        die("%s:%d: bad server line: %s", path, lineno, line);
      rc = memcached_server_add_with_weight(memc, host, (in_port_t) port, (uint32_t) weight);
      if (memcached_success(rc)) {
        if (cfg->n == MAX_SERVERS) die("too many servers");
        struct entry *e = &cfg->servers[cfg->n++];
        snprintf(e->host, sizeof e->host, "%.1024s", host);
        e->port = (in_port_t) (port ? port : MEMCACHED_DEFAULT_PORT);
        e->weight = (uint32_t) weight;
      }
    } else if (strcmp(verb, "servers") == 0) {
      memcached_server_list_st list = memcached_servers_parse(rest);
      if (verbose) {
        printf("line %d: %s\n  -> memcached_servers_parse: ", lineno, line);
        if (!list) printf("NULL");
        for (uint32_t i = 0; list && i < memcached_server_list_count(list); i++)
          printf("%s[%s]:%u weight %u", i ? ", " : "", list[i].hostname, list[i].port,
                 list[i].weight);
        printf("\n");
      }
      if (!list) {
        if (!verbose) die("%s:%d: memcached_servers_parse returned NULL", path, lineno);
        continue;
      }
      rc = memcached_server_push(memc, list);
      if (memcached_success(rc)) {
        for (uint32_t i = 0; i < memcached_server_list_count(list); i++) {
          if (cfg->n == MAX_SERVERS) die("too many servers");
          struct entry *e = &cfg->servers[cfg->n++];
          snprintf(e->host, sizeof e->host, "%s", list[i].hostname);
          e->port = list[i].port;
          e->weight = list[i].weight;
        }
      }
      memcached_server_list_free(list);
    } else if (strcmp(verb, "namespace") == 0) {
      rc = memcached_callback_set(memc, MEMCACHED_CALLBACK_NAMESPACE, rest);
      snprintf(cfg->namespace_, sizeof cfg->namespace_, "%s", rest);
    } else {
      die("%s:%d: unknown verb %s", path, lineno, verb);
    }
    report(verbose, lineno, line, memc, rc);
  }
  fclose(f);
  return memc;
}

static int hexval(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static int read_keys(const char *path, struct key *keys) {
  FILE *f = fopen(path, "r");
  if (!f) die("%s: %s", path, strerror(errno));
  static char buf[MAX_LINE * 4];
  int n = 0;
  while (fgets(buf, sizeof buf, f)) {
    char *line = trim(buf);
    if (*line == 0 || *line == '#') continue;
    if (n == MAX_KEYS) die("too many keys");
    size_t hl = strcmp(line, "-") == 0 ? 0 : strlen(line);
    if (hl % 2) die("%s: odd hex length at key %d", path, n);
    keys[n].len = hl / 2;
    keys[n].bytes = malloc(hl / 2 + 1);
    for (size_t i = 0; i < hl / 2; i++) {
      int hi = hexval(line[2 * i]), lo = hexval(line[2 * i + 1]);
      if (hi < 0 || lo < 0) die("%s: bad hex at key %d", path, n);
      keys[n].bytes[i] = (char) (hi << 4 | lo);
    }
    keys[n].bytes[hl / 2] = 0;
    n++;
  }
  fclose(f);
  return n;
}

/* position_to_entry maps the client's server positions (after SORT_HOSTS) to the
 * configuration's entries, matching host and port; equal entries are taken in order. */
static void position_to_entry(memcached_st *memc, const struct config *cfg, int *map) {
  int used[MAX_SERVERS] = {0};
  if ((int) memcached_server_count(memc) != cfg->n)
    die("client has %u servers, configuration %d", memcached_server_count(memc), cfg->n);
  for (int p = 0; p < cfg->n; p++) {
    const memcached_instance_st *in = memcached_server_instance_by_position(memc, (uint32_t) p);
    map[p] = -1;
    for (int i = 0; i < cfg->n; i++) {
      if (!used[i] && strcmp(cfg->servers[i].host, memcached_server_name(in)) == 0
          && cfg->servers[i].port == memcached_server_port(in)) {
        used[i] = 1;
        map[p] = i;
        break;
      }
    }
    if (map[p] < 0) die("position %d (%s:%u) matches no entry", p, memcached_server_name(in),
                        memcached_server_port(in));
  }
}

static int same_server(const struct entry *a, const struct entry *b) {
  return strcmp(a->host, b->host) == 0 && a->port == b->port;
}

static void print_list(const char *label, const int *list, int n, const char *why) {
  if (n == 0) return;
  printf("# %s (%d keys): ", label, n);
  for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", list[i]);
  printf("; %s\n", why);
}

static int vectors(const char *system, const char *keys_path, const char *conf_path) {
  static struct key keys[MAX_KEYS];
  int nkeys = read_keys(keys_path, keys);
  struct config cfg, cfg_bin;
  memcached_st *text = build(conf_path, &cfg, 0);
  memcached_st *bin = build(conf_path, &cfg_bin, 0);
  memcached_return_t rc = memcached_behavior_set(bin, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
  if (memcached_failed(rc)) die("binary protocol: %s", memcached_strerror(bin, rc));
  if (cfg.n == 0) die("%s: no servers", conf_path);

  int map[MAX_SERVERS];
  position_to_entry(text, &cfg, map);

  /* Physical servers: one per distinct host:port. */
  int phys_of[MAX_SERVERS], nphys = 0, phys_entry[MAX_SERVERS], phys_dups[MAX_SERVERS] = {0};
  for (int i = 0; i < cfg.n; i++) {
    phys_of[i] = -1;
    for (int q = 0; q < nphys; q++)
      if (same_server(&cfg.servers[phys_entry[q]], &cfg.servers[i])) phys_of[i] = q;
    if (phys_of[i] < 0) {
      phys_entry[nphys] = i;
      phys_of[i] = nphys++;
    } else {
      phys_dups[phys_of[i]] = 1;
    }
  }

  const char *base = strrchr(conf_path, '/');
  base = base ? base + 1 : conf_path;
  char value[512];
  snprintf(value, sizeof value, "lmvec %s", base);

  static int result[MAX_KEYS], api[MAX_KEYS], binary[MAX_KEYS], ambiguous[MAX_KEYS];
  static int api_ns[MAX_KEYS];
  int napi = 0, nbinary = 0, nambiguous = 0, napi_ns = 0;
  size_t nslen = strlen(cfg.namespace_);
  char refused_empty[512] = "", refused_long[512] = "";
  static int carried[MAX_KEYS];

  for (int k = 0; k < nkeys; k++) {
    uint32_t pos_text = memcached_generate_hash(text, keys[k].bytes, keys[k].len);
    uint32_t pos_bin = memcached_generate_hash(bin, keys[k].bytes, keys[k].len);
    if (pos_text != pos_bin) die("key %d: text and binary clients disagree", k);
    result[k] = map[pos_text];
    if (keys[k].len >= 1 && keys[k].len <= 250 && nslen + keys[k].len > 250) {
      /* The client accepts the key, but memcached refuses namespace + key; over the text
       * protocol that error would also desynchronise the connection. */
      api_ns[napi_ns++] = k;
      carried[k] = 0;
      continue;
    }
    int has_space = memchr(keys[k].bytes, ' ', keys[k].len) != NULL;
    memcached_st *client = has_space ? bin : text;
    rc = memcached_set(client, keys[k].bytes, keys[k].len, value, strlen(value), 0, 0);
    if (rc == MEMCACHED_BAD_KEY_PROVIDED) {
      char *refusal = keys[k].len == 0 ? refused_empty : refused_long;
      snprintf(refusal, 512, "%s", last_error(client));
      api[napi++] = k;
      carried[k] = 0;
      continue;
    }
    if (memcached_failed(rc))
      die("key %d: memcached_set: %s | %s", k, memcached_strerror(client, rc),
          memcached_last_error_message(client));
    if (has_space) binary[nbinary++] = k;
    carried[k] = 1;

    memcached_return_t err;
    const memcached_instance_st *in =
        memcached_server_by_key(client, keys[k].bytes, keys[k].len, &err);
    if (!in) die("key %d: memcached_server_by_key: %s", k, memcached_strerror(client, err));
    if (strcmp(memcached_server_name(in), cfg.servers[result[k]].host) != 0
        || memcached_server_port(in) != cfg.servers[result[k]].port)
      die("key %d: memcached_server_by_key says %s:%u, memcached_generate_hash %s:%u", k,
          memcached_server_name(in), memcached_server_port(in), cfg.servers[result[k]].host,
          cfg.servers[result[k]].port);
  }

  /* Read every server on its own. */
  static int found[MAX_KEYS], hits[MAX_KEYS];
  for (int k = 0; k < nkeys; k++) found[k] = -1, hits[k] = 0;
  for (int q = 0; q < nphys; q++) {
    const struct entry *e = &cfg.servers[phys_entry[q]];
    memcached_st *one = memcached_create(NULL);
    memcached_behavior_set(one, MEMCACHED_BEHAVIOR_BINARY_PROTOCOL, 1);
    if (cfg.namespace_[0]) memcached_callback_set(one, MEMCACHED_CALLBACK_NAMESPACE, cfg.namespace_);
    rc = memcached_server_add(one, e->host, e->port);
    if (memcached_failed(rc)) die("reader %s:%u: %s", e->host, e->port, memcached_strerror(one, rc));
    for (int k = 0; k < nkeys; k++) {
      if (!carried[k]) continue;
      size_t vlen;
      uint32_t flags;
      char *v = memcached_get(one, keys[k].bytes, keys[k].len, &vlen, &flags, &rc);
      if (v) {
        if (vlen == strlen(value) && memcmp(v, value, vlen) == 0) {
          found[k] = q;
          hits[k]++;
        }
        free(v);
      } else if (rc != MEMCACHED_NOTFOUND) {
        die("key %d on %s:%u: memcached_get: %s | %s", k, e->host, e->port,
            memcached_strerror(one, rc), memcached_last_error_message(one));
      }
    }
    memcached_free(one);
  }
  for (int k = 0; k < nkeys; k++) {
    if (!carried[k]) continue;
    if (hits[k] != 1) die("key %d found on %d servers", k, hits[k]);
    if (found[k] != phys_of[result[k]])
      die("key %d: held by %s:%u, memcached_generate_hash says entry %d", k,
          cfg.servers[phys_entry[found[k]]].host, cfg.servers[phys_entry[found[k]]].port,
          result[k]);
    if (phys_dups[found[k]]) ambiguous[nambiguous++] = k;
  }

  printf("# system: %s, configuration %s\n", system, base);
  printf("# front door: memcached_set through the configured client to real memcached servers, then "
         "memcached_get on each server alone; each key found on exactly one server, the one "
         "memcached_server_by_key and memcached_generate_hash name\n");
  printf("# servers:");
  for (int i = 0; i < cfg.n; i++)
    printf(" %d=%s:%u", i, cfg.servers[i].host, (unsigned) cfg.servers[i].port);
  printf("\n");
  printf("# keys: %d = %d set through the client (%d of them over the binary protocol) + %d placed "
         "by memcached_generate_hash\n",
         nkeys, nkeys - napi - napi_ns, nbinary, napi + napi_ns);
  print_list("binary protocol", binary, nbinary,
             "keys with a space: the text protocol cannot carry them, so they were set through a "
             "second client from the same configuration with MEMCACHED_BEHAVIOR_BINARY_PROTOCOL on "
             "(the protocol does not change placement)");
  char why[1024];
  snprintf(why, sizeof why,
           "memcached_set refuses them (empty key: \"%s\"; keys over 250 bytes: \"%s\"); placed "
           "by memcached_generate_hash on the same client",
           refused_empty, refused_long);
  print_list("api", api, napi, why);
  print_list("api, namespace", api_ns, napi_ns,
             "namespace + key is over 250 bytes: the client sends it but memcached refuses it "
             "(CLIENT_ERROR); placed by memcached_generate_hash (see the README for how it hashes them)");
  print_list("duplicate entries", ambiguous, nambiguous,
             "held by a server listed more than once; the entry index is memcached_generate_hash's");
  for (int k = 0; k < nkeys; k++) printf("%d %d\n", k, result[k]);

  memcached_free(text);
  memcached_free(bin);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "vectors") == 0) return vectors(argv[2], argv[3], argv[4]);
  if (argc == 3 && strcmp(argv[1], "refuse") == 0) {
    struct config cfg;
    memcached_st *memc = build(argv[2], &cfg, 1);
    memcached_free(memc);
    return 0;
  }
  fprintf(stderr, "usage: lmvec vectors SYSTEM KEYS CONF | lmvec refuse CONF\n");
  return 2;
}
