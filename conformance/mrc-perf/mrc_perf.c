/* mrc-perf: a perftest-style tool for MRC written only against the OCP API (mrc.h, mrc_ctl.h)
 * and libibverbs, so that it builds against any vendor's headers and lib_mrc.so.
 *
 * It speaks the control exchange of the DUT contract (ci/dut/README.md: hello, welcome, qps,
 * ready, done, result; one JSON object per line over TCP) and the contract's data pattern, so it
 * interoperates with the reference endpoint (`mrct endpoint`) and with itself, and `--dut` takes
 * every parameter from the contract's MRC_* environment: one DUT profile
 * (conformance/mrc-perf/mrc-perf.toml) runs the scenario library against a vendor library.
 *
 * One process serves every connection of its host (one device, one engine, like a NIC): in
 * node mode it accepts MRC_CLIENTS connections and connects to every server of MRC_SERVERS at
 * the same time, one thread per connection.
 *
 * Plain C11 on purpose: it must compile as applications do. Usage: mrc-perf --help. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "mrc.h"
#include "mrc_ctl.h"
#include "wc_status.h"

enum { EXIT_OK = 0, EXIT_FAILED = 1, EXIT_USAGE = 2, EXIT_UNSUPPORTED = 69 };
int mrc_perf_script_main(void); /* script_serve.c */
enum { PROTOCOL_VERSION = 1, MAX_PEERS = 64, MAX_EVS = 1024, LINE_MAX_BYTES = 1 << 20 };
enum { MAX_POST_LIST = 64 }; /* --post-list limit: the WR array is on the stack */
#define FMT_PROFILE_ID 1
#define CC_PROFILE_ID 1
#define EV_PROFILE_BASE 100 /* + peer index: one explicit EV profile per peer */
/* A responder's QPs get their own copy of the peer's profile (+ this): the EV states of the
 * requester's QPs are theirs alone, as with one endpoint process per pair. */
#define EV_PROFILE_RESPONDER (MAX_PEERS + 1)
#define BUFFER_LIMIT_BYTES (64ull << 20) /* per connection */

/* ------------------------------------------------------------------------------------------ */
/* configuration                                                                               */
/* ------------------------------------------------------------------------------------------ */
struct peer_server {
  char node[64];
  char addr[64];
};

struct config {
  const char* role; /* client, server, node */
  const char* device;
  const char* ev_format;        /* stev, srv6, udp */
  const char* gid;              /* node GID text; empty: port 1's GID index 3 */
  const char* ev_profile;       /* explicit EV profile TOML (port, da / val) or empty */
  const char* peer_ev_profiles; /* node mode: GID=path,... */
  const char* cc;               /* nscc, none, "" */
  const char* cc_profile;       /* TOML with an [nscc] table, or empty */
  const char* listen_addr;
  const char* event_log;
  const char* result_path;
  const char* name;
  int port;
  int evs_per_plane;
  uint32_t pmtu;
  uint32_t mpr, wimm, timeout;
  uint32_t retry_linear, retry_exp;
  int imm;
  uint64_t size, iters, duration_ns;
  uint32_t qps, tx_depth;
  uint32_t post_list; /* WRs per mrc_post_send call (client, --post-list) */
  double stall_s;
  uint64_t seed;
  int clients; /* connections to accept; -1: forever (standalone server) */
  struct peer_server servers[MAX_PEERS];
  int nservers;
  uint64_t sweep_min, sweep_max; /* client: message sizes min..max, powers of two */
  int gid_index;                 /* -1: find the node GID */
};

static struct config cfg = {.role = "",
                            .device = "",
                            .ev_format = "stev",
                            .gid = "",
                            .ev_profile = "",
                            .peer_ev_profiles = "",
                            .cc = "",
                            .cc_profile = "",
                            .listen_addr = "",
                            .event_log = "",
                            .result_path = "",
                            .name = "",
                            .port = 18515,
                            .evs_per_plane = 4,
                            .pmtu = 4096,
                            .mpr = 64,
                            .wimm = 64,
                            .timeout = 18,
                            .retry_linear = 7,
                            .retry_exp = 7,
                            .size = 65536,
                            .iters = 1000,
                            .qps = 1,
                            .tx_depth = 16,
                            .post_list = 1,
                            .stall_s = 30,
                            .seed = 1,
                            .clients = -1,
                            .gid_index = -1};

static void die_usage(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "mrc-perf: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  exit(EXIT_USAGE);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t parse_u64(const char* what, const char* text, uint64_t lo, uint64_t hi) {
  char* end = NULL;
  errno = 0;
  unsigned long long v = strtoull(text, &end, 0);
  uint64_t mult = 1;
  if (end && (*end == 'K' || *end == 'k'))
    mult = 1024, end++;
  else if (end && (*end == 'M' || *end == 'm'))
    mult = 1024 * 1024, end++;
  else if (end && *end == 'G')
    mult = 1024ull * 1024 * 1024, end++;
  if (errno || end == text || *end != '\0' || v * mult < lo || v * mult > hi)
    die_usage("%s: '%s' is not a number in %" PRIu64 "..%" PRIu64, what, text, lo, hi);
  return v * mult;
}

static const char* env_or(const char* name, const char* dflt) {
  const char* v = getenv(name);
  return v && *v ? v : dflt;
}

/* The DUT contract's environment (ci/dut/README.md). */
static void config_from_env(void) {
  cfg.role = env_or("MRC_ROLE", "");
  if (strcmp(cfg.role, "client") && strcmp(cfg.role, "server") && strcmp(cfg.role, "node"))
    die_usage("MRC_ROLE=%s: expected client, server or node", cfg.role);
  cfg.name = env_or("MRC_NODE", "");
  cfg.ev_format = env_or("MRC_EV_FORMAT", "stev");
  cfg.gid = env_or("MRC_GID", "");
  cfg.ev_profile = env_or("MRC_EV_PROFILE", "");
  cfg.peer_ev_profiles = env_or("MRC_PEER_EV_PROFILES", "");
  if (*env_or("MRC_EVS_PER_PLANE", ""))
    cfg.evs_per_plane = (int)parse_u64("MRC_EVS_PER_PLANE", getenv("MRC_EVS_PER_PLANE"), 1, 256);
  cfg.cc = env_or("MRC_CC", "");
  cfg.cc_profile = env_or("MRC_CC_PROFILE", "");
  cfg.pmtu = (uint32_t)parse_u64("MRC_PMTU", env_or("MRC_PMTU", "0"), 0, 4096);
  if (cfg.pmtu == 0) cfg.pmtu = 4096;
  cfg.mpr = (uint32_t)parse_u64("MRC_MPR", env_or("MRC_MPR", "64"), 1, 65535);
  cfg.wimm = (uint32_t)parse_u64("MRC_WIMM", env_or("MRC_WIMM", "64"), 1, 65535);
  cfg.timeout = (uint32_t)parse_u64("MRC_TIMEOUT", env_or("MRC_TIMEOUT", "18"), 1, 31);
  const char* retry = env_or("MRC_RETRY", "7:7");
  unsigned lin = 0, ex = 0;
  if (sscanf(retry, "%u:%u", &lin, &ex) != 2 || lin > 255 || ex > 255)
    die_usage("MRC_RETRY=%s: expected LINEAR:EXP", retry);
  cfg.retry_linear = lin;
  cfg.retry_exp = ex;
  cfg.imm = !strcmp(env_or("MRC_OP", "write"), "write_with_imm");
  cfg.size = parse_u64("MRC_SIZE", env_or("MRC_SIZE", "65536"), 1, 1ull << 30);
  if (*env_or("MRC_DURATION_S", "")) {
    cfg.duration_ns = (uint64_t)(atof(getenv("MRC_DURATION_S")) * 1e9);
    cfg.iters = 0;
  } else {
    cfg.iters = parse_u64("MRC_MESSAGES", env_or("MRC_MESSAGES", "1000"), 1, 1ull << 40);
  }
  cfg.qps = (uint32_t)parse_u64("MRC_QPS", env_or("MRC_QPS", "1"), 1, 1024);
  cfg.tx_depth = (uint32_t)parse_u64("MRC_TX_DEPTH", env_or("MRC_TX_DEPTH", "16"), 1, 16384);
  cfg.stall_s = atof(env_or("MRC_STALL_S", "30"));
  cfg.seed = parse_u64("MRC_SEED", env_or("MRC_SEED", "1"), 0, UINT64_MAX);
  cfg.port = (int)parse_u64("MRC_CTL_PORT", env_or("MRC_CTL_PORT", "18515"), 1, 65535);
  cfg.listen_addr = env_or("MRC_CTL_ADDR", "");
  cfg.event_log = env_or("MRC_EVENT_LOG", "");
  cfg.result_path = env_or("MRC_RESULT", "");
  if (!strcmp(cfg.role, "client")) {
    snprintf(cfg.servers[0].node, sizeof cfg.servers[0].node, "%s", env_or("MRC_PEER_NODE", ""));
    snprintf(cfg.servers[0].addr, sizeof cfg.servers[0].addr, "%s",
             env_or("MRC_PEER_CTL_ADDR", ""));
    if (!cfg.servers[0].addr[0]) die_usage("MRC_PEER_CTL_ADDR is not set");
    cfg.nservers = 1;
    cfg.clients = 0;
  } else if (!strcmp(cfg.role, "server")) {
    cfg.clients = 1;
  } else {
    /* node: MRC_SERVERS=node=addr,... (the peers this host writes to), MRC_CLIENTS=N */
    char* list = strdup(env_or("MRC_SERVERS", ""));
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
         tok = strtok_r(NULL, ",", &save)) {
      if (cfg.nservers == MAX_PEERS) die_usage("MRC_SERVERS: more than %d servers", MAX_PEERS);
      char* eq = strchr(tok, '=');
      if (!eq) die_usage("MRC_SERVERS: '%s' is not NODE=ADDR", tok);
      *eq = '\0';
      snprintf(cfg.servers[cfg.nservers].node, sizeof cfg.servers[0].node, "%s", tok);
      snprintf(cfg.servers[cfg.nservers].addr, sizeof cfg.servers[0].addr, "%s", eq + 1);
      cfg.nservers++;
    }
    free(list);
    cfg.clients = (int)parse_u64("MRC_CLIENTS", env_or("MRC_CLIENTS", "0"), 0, MAX_PEERS);
  }
}

/* ------------------------------------------------------------------------------------------ */
/* the data pattern (the contract's, reference-impl/runtime/pattern.cc)                        */
/* ------------------------------------------------------------------------------------------ */
#define GOLDEN 0x9E3779B97F4A7C15ull
static uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static uint64_t pattern_base(uint64_t seed, uint32_t q, uint64_t m) {
  return mix(seed ^ mix(((uint64_t)q << 40) ^ m ^ 0x5bd1e995ull));
}
static void fill_pattern(uint8_t* p, size_t n, uint64_t seed, uint32_t q, uint64_t m) {
  const uint64_t base = pattern_base(seed, q, m);
  size_t k = 0;
  for (; k + 8 <= n; k += 8) {
    uint64_t w = mix(base + (k / 8) * GOLDEN);
    memcpy(p + k, &w, 8);
  }
  if (k < n) {
    uint64_t w = mix(base + (k / 8) * GOLDEN);
    memcpy(p + k, &w, n - k);
  }
}
/* Offset of the first wrong byte, or -1. */
static long check_pattern(const uint8_t* p, size_t n, uint64_t seed, uint32_t q, uint64_t m) {
  const uint64_t base = pattern_base(seed, q, m);
  for (size_t k = 0; k < n; k += 8) {
    uint64_t w = mix(base + (k / 8) * GOLDEN);
    size_t len = n - k < 8 ? n - k : 8;
    if (memcmp(p + k, &w, len)) {
      for (size_t b = 0; b < len; b++)
        if (p[k + b] != ((uint8_t*)&w)[b]) return (long)(k + b);
    }
  }
  return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* minimal JSON: the control messages are flat objects written by nlohmann::json or by us     */
/* ------------------------------------------------------------------------------------------ */
/* Pointer to the value of "key" at the top level of obj (or NULL). */
static const char* json_find(const char* obj, const char* key) {
  size_t kl = strlen(key);
  int depth = 0;
  for (const char* p = obj; *p; p++) {
    if (*p == '"') {
      const char* s = p + 1;
      const char* e = s;
      while (*e && *e != '"') e += (*e == '\\' && e[1]) ? 2 : 1;
      if (!*e) return NULL;
      if (depth == 1 && (size_t)(e - s) == kl && !memcmp(s, key, kl)) {
        const char* c = e + 1;
        while (*c == ' ') c++;
        if (*c == ':') {
          c++;
          while (*c == ' ') c++;
          return c;
        }
      }
      p = e;
    } else if (*p == '{' || *p == '[') {
      depth++;
    } else if (*p == '}' || *p == ']') {
      depth--;
    }
  }
  return NULL;
}
static int json_u64(const char* obj, const char* key, uint64_t* out) {
  const char* v = json_find(obj, key);
  if (!v || (*v < '0' || *v > '9')) return -1;
  *out = strtoull(v, NULL, 10);
  return 0;
}
static int json_bool(const char* obj, const char* key, int* out) {
  const char* v = json_find(obj, key);
  if (!v) return -1;
  if (!strncmp(v, "true", 4))
    *out = 1;
  else if (!strncmp(v, "false", 5))
    *out = 0;
  else
    return -1;
  return 0;
}
static int json_str(const char* obj, const char* key, char* out, size_t cap) {
  const char* v = json_find(obj, key);
  if (!v || *v != '"') return -1;
  size_t n = 0;
  for (v++; *v && *v != '"'; v++) {
    char c = *v;
    if (c == '\\' && v[1]) {
      v++;
      c = *v == 'n' ? '\n' : *v == 't' ? '\t' : *v == 'u' ? '?' : *v;
      if (*v == 'u') v += strlen(v) >= 5 ? 4 : 0;
    }
    if (n + 1 < cap) out[n++] = c;
  }
  out[n] = '\0';
  return 0;
}
/* Appends s to a JSON string (without the quotes), escaped. */
static void json_escape(char* out, size_t cap, const char* s) {
  size_t n = strlen(out);
  for (; *s && n + 7 < cap; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[n++] = '\\';
      out[n++] = (char)c;
    } else if (c < 0x20) {
      n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
    } else {
      out[n++] = (char)c;
    }
  }
  out[n] = '\0';
}

struct remote_qp {
  uint32_t qpn, psn, rkey;
  uint64_t va;
};
/* Reads "qp":[{"qpn","psn","rkey","va"}...]; returns the count or -1. */
static int json_qps(const char* obj, struct remote_qp* out, int cap) {
  const char* v = json_find(obj, "qp");
  if (!v || *v != '[') return -1;
  int n = 0;
  v++;
  for (;;) {
    while (*v == ' ' || *v == ',') v++;
    if (*v == ']') return n;
    if (*v != '{' || n == cap) return -1;
    const char* end = strchr(v, '}');
    if (!end) return -1;
    char one[512];
    size_t len = (size_t)(end - v + 1);
    if (len >= sizeof one) return -1;
    memcpy(one, v, len);
    one[len] = '\0';
    uint64_t qpn, psn, rkey, va;
    if (json_u64(one, "qpn", &qpn) || json_u64(one, "psn", &psn) || json_u64(one, "rkey", &rkey) ||
        json_u64(one, "va", &va))
      return -1;
    out[n++] = (struct remote_qp){(uint32_t)qpn, (uint32_t)psn, (uint32_t)rkey, va};
    v = end + 1;
  }
}

/* ------------------------------------------------------------------------------------------ */
/* control channel: one JSON object per line                                                   */
/* ------------------------------------------------------------------------------------------ */
struct chan {
  int fd;
  char* buf;
  size_t len;
};

static int chan_send(struct chan* c, const char* line) {
  size_t n = strlen(line);
  char* msg = malloc(n + 2);
  memcpy(msg, line, n);
  msg[n] = '\n';
  size_t off = 0;
  while (off < n + 1) {
    ssize_t w = send(c->fd, msg + off, n + 1 - off, MSG_NOSIGNAL);
    if (w <= 0) {
      free(msg);
      return -1;
    }
    off += (size_t)w;
  }
  free(msg);
  return 0;
}

/* Next line within timeout_ms (-1: forever); 0 ok, -1 closed or error, -2 timeout. */
static int chan_recv(struct chan* c, char** line, int timeout_ms) {
  if (!c->buf) c->buf = malloc(LINE_MAX_BYTES);
  uint64_t until = timeout_ms < 0 ? UINT64_MAX : now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    char* nl = memchr(c->buf, '\n', c->len);
    if (nl) {
      size_t n = (size_t)(nl - c->buf);
      *line = malloc(n + 1);
      memcpy(*line, c->buf, n);
      (*line)[n] = '\0';
      memmove(c->buf, nl + 1, c->len - n - 1);
      c->len -= n + 1;
      return 0;
    }
    if (c->len >= LINE_MAX_BYTES - 1) return -1;
    uint64_t t = now_ns();
    if (t >= until && timeout_ms != 0) return -2;
    struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
    int wait = until == UINT64_MAX ? 1000 : (int)((until - t) / 1000000ull + 1);
    if (timeout_ms == 0) wait = 0;
    int r = poll(&pfd, 1, wait);
    if (r < 0 && errno != EINTR) return -1;
    if (r <= 0) {
      if (timeout_ms == 0) return -2;
      continue;
    }
    ssize_t got = recv(c->fd, c->buf + c->len, LINE_MAX_BYTES - 1 - c->len, 0);
    if (got <= 0) return -1;
    c->len += (size_t)got;
  }
}

/* A message of the wanted type; the peer's {"type":"error"} becomes err. */
static int chan_expect(struct chan* c, const char* type, char** line, int timeout_ms, char* err,
                       size_t errcap) {
  int r = chan_recv(c, line, timeout_ms);
  if (r) {
    snprintf(err, errcap, "control connection: %s waiting for '%s'", r == -2 ? "timeout" : "closed",
             type);
    return -1;
  }
  char got[32] = "";
  json_str(*line, "type", got, sizeof got);
  if (!strcmp(got, type)) return 0;
  if (!strcmp(got, "error")) {
    char msg[512] = "";
    json_str(*line, "message", msg, sizeof msg);
    snprintf(err, errcap, "peer: %s", msg);
  } else {
    snprintf(err, errcap, "control connection: expected '%s', got '%s'", type, got);
  }
  free(*line);
  *line = NULL;
  return -1;
}

/* ------------------------------------------------------------------------------------------ */
/* the device and its controller                                                               */
/* ------------------------------------------------------------------------------------------ */
static struct ibv_context* g_vctx;
static struct mrc_context* g_ctx;
static struct ibv_pd* g_pd;
static union ibv_gid g_gid;
static int g_gid_index;
static int g_planes;
static uint32_t g_port_mtu = 4096;
static uint32_t g_max_qp_wr = 1024; /* the device's, from ibv_query_device */
static uint32_t g_max_cqe = 4096;
static int g_have_profiles; /* our EV profiles are ONLINE (else the device's default) */
static int g_have_cc;
static struct mrc_cq* g_ev_cq;
static atomic_uint_least64_t g_ev_retired;
/* ASSUMED_BAD events per EV profile (index: id - EV_PROFILE_BASE): a connection reports those
 * of its own profile, the EVs towards its peer. */
static atomic_uint_least64_t g_ev_retired_by_profile[2 * (MAX_PEERS + 1)];
static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
/* Test only (mrc_perf_netns_test.sh): fill with another seed than the one announced, so that
 * the peer's verification must fail. */
static uint64_t g_seed_skew;
static FILE* g_log;

struct peer_profile {
  union ibv_gid gid;
  uint64_t id;
};
static struct peer_profile g_profiles[MAX_PEERS];
static int g_nprofiles;
static uint64_t g_default_profile; /* 0: none of ours */

static void log_event(const char* fmt, ...) {
  if (!g_log) return;
  char body[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(body, sizeof body, fmt, ap);
  va_end(ap);
  pthread_mutex_lock(&g_log_mu);
  fprintf(g_log, "{\"t_ns\":%" PRIu64 ",%s}\n", now_ns(), body);
  pthread_mutex_unlock(&g_log_mu);
}

static const char* wc_status_name(enum ibv_wc_status s) {
  const char* n = mrc_wc_status_name(s);
  return n ? n : ibv_wc_status_str(s);
}

static int parse_gid(const char* text, union ibv_gid* out) {
  struct in6_addr a;
  if (inet_pton(AF_INET6, text, &a) != 1) return -1;
  memcpy(out->raw, &a, 16);
  return 0;
}

/* Explicit EVs from an EV profile TOML as the runner writes them: [[evs]] tables with
 * `port = N` and `da = "IPv6"` (SRv6 outer DA) or `val = N` (STEV/UDP value). */
static int read_ev_profile(const char* path, struct mrc_ctl_ev* evs, int cap) {
  FILE* f = fopen(path, "r");
  if (!f) die_usage("%s: cannot read the EV profile: %s", path, strerror(errno));
  char line[1024];
  int n = -1, lineno = 0;
  while (fgets(line, sizeof line, f)) {
    lineno++;
    char* h = strchr(line, '#');
    if (h) *h = '\0';
    char* p = line;
    while (*p == ' ' || *p == '\t') p++;
    if (!strncmp(p, "[[evs]]", 7)) {
      if (++n == cap) die_usage("%s:%d: more than %d EVs", path, lineno, cap);
      memset(&evs[n], 0, sizeof evs[n]);
      continue;
    }
    if (n < 0) continue;
    char key[32], val[256];
    if (sscanf(p, "%31[a-z_] = %255s", key, val) != 2) continue;
    if (!strcmp(key, "port")) {
      evs[n].port = (uint8_t)parse_u64("EV profile port", val, 1, 255);
    } else if (!strcmp(key, "da")) {
      char* q = val[0] == '"' ? val + 1 : val;
      char* e = strchr(q, '"');
      if (e) *e = '\0';
      struct in6_addr a;
      if (inet_pton(AF_INET6, q, &a) != 1)
        die_usage("%s:%d: da = %s: not an IPv6 address", path, lineno, q);
      memcpy(evs[n].val, &a, 16);
    } else if (!strcmp(key, "val") || !strcmp(key, "ev")) {
      uint32_t v = htonl((uint32_t)parse_u64("EV profile val", val, 0, UINT32_MAX));
      memcpy(evs[n].val, &v, 4);
    }
  }
  fclose(f);
  for (int i = 0; i <= n; i++)
    if (evs[i].port == 0) die_usage("%s: EV %d has no port", path, i + 1);
  return n + 1;
}

/* Distinct STEV/UDP values, evs_per_plane per port: both 16-bit fields (UDP: the one) = k. */
static int generated_evs(struct mrc_ctl_ev* evs, int cap) {
  int n = 0;
  for (int port = 1; port <= g_planes; port++)
    for (int k = 0; k < cfg.evs_per_plane && n < cap; k++, n++) {
      memset(&evs[n], 0, sizeof evs[n]);
      uint32_t id = (uint32_t)(n + 1);
      if (!strcmp(cfg.ev_format, "udp")) {
        uint16_t v = htons((uint16_t)(0x1000 + id));
        memcpy(evs[n].val, &v, 2);
      } else {
        uint32_t v = htonl(0x00010001u * id);
        memcpy(evs[n].val, &v, 4);
      }
      evs[n].port = (uint8_t)port;
    }
  return n;
}

static int ctl_fail(const char* what) {
  fprintf(stderr, "mrc-perf: controller: %s: %s\n", what, strerror(errno));
  return -1;
}

/* A profile already ONLINE on the device: a device shared by the node's processes (SoftMRC's
 * device mode, a NIC) keeps the profiles of the controller that made them, e.g. an earlier
 * mrc-perf run. Those are used as they are: taking them OFFLINE would pull them from under
 * other processes' QPs. */
static int already_online(const char* what, uint64_t id, int state) {
  if (state != MRC_CTL_PROFILE_ONLINE) return 0;
  static int said;
  if (!said++)
    fprintf(stderr,
            "mrc-perf: controller: %s %llu is already ONLINE on the device: used as it is\n", what,
            (unsigned long long)id);
  return 1;
}

static int make_format_profile(void) {
  struct mrc_ctl_ev_fmt_profile_attr fa;
  memset(&fa, 0, sizeof fa);
  if (!mrc_ctl_query_ev_fmt_profile(g_ctx, FMT_PROFILE_ID, &fa, MRC_CTL_EV_FMT_PROFILE_STATE) &&
      already_online("EV format profile", FMT_PROFILE_ID, fa.profile_state))
    return 0;
  memset(&fa, 0, sizeof fa);
  uint32_t mode = !strcmp(cfg.ev_format, "srv6")  ? MRC_CTL_EV_FMT_MODE_SRV6
                  : !strcmp(cfg.ev_format, "udp") ? MRC_CTL_EV_FMT_MODE_UDP
                                                  : MRC_CTL_EV_FMT_MODE_STEV;
  /* SRv6: the EV is the outer DA, 128 bits, as four 32-bit fields. */
  struct mrc_ctl_ev_fmt_field stev[2] = {{16}, {16}}, udp[1] = {{16}},
                              srv6[4] = {{32}, {32}, {32}, {32}};
  fa.profile_state = MRC_CTL_PROFILE_OFFLINE;
  fa.ev_fmt_mode = mode;
  fa.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
  fa.ev_fmt_op.fmt_fields = mode == MRC_CTL_EV_FMT_MODE_STEV  ? stev
                            : mode == MRC_CTL_EV_FMT_MODE_UDP ? udp
                                                              : srv6;
  fa.ev_fmt_op.fmt_field_count = mode == MRC_CTL_EV_FMT_MODE_STEV   ? 2
                                 : mode == MRC_CTL_EV_FMT_MODE_SRV6 ? 4
                                                                    : 1;
  if (mrc_ctl_modify_ev_fmt_profile(
          g_ctx, FMT_PROFILE_ID, &fa,
          MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP))
    return ctl_fail("EV format profile to OFFLINE");
  memset(&fa, 0, sizeof fa);
  fa.profile_state = MRC_CTL_PROFILE_ONLINE;
  if (mrc_ctl_modify_ev_fmt_profile(g_ctx, FMT_PROFILE_ID, &fa, MRC_CTL_EV_FMT_PROFILE_STATE))
    return ctl_fail("EV format profile to ONLINE");
  return 0;
}

static int make_ev_profile(uint64_t id, struct mrc_ctl_ev* evs, int n) {
  struct mrc_ctl_ev_profile_attr ea;
  memset(&ea, 0, sizeof ea);
  if (!mrc_ctl_query_ev_profile(g_ctx, id, &ea, MRC_CTL_EV_PROFILE_STATE) &&
      already_online("EV profile", id, ea.profile_state))
    return 0;
  memset(&ea, 0, sizeof ea);
  ea.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ea.ev_mode = MRC_CTL_EV_MODE_EXP;
  ea.ev_fmt_profile_id = FMT_PROFILE_ID;
  ea.ev_count = (uint32_t)n;
  ea.ev_min_active = 1;
  ea.ev_event_mask = MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD;
  if (mrc_ctl_modify_ev_profile(g_ctx, id, &ea,
                                MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE |
                                    MRC_CTL_EV_PROFILE_FMT_ID | MRC_CTL_EV_PROFILE_COUNT |
                                    MRC_CTL_EV_PROFILE_MIN_ACTIVE | MRC_CTL_EV_PROFILE_EVENT_MASK))
    return ctl_fail("EV profile to OFFLINE");
  for (int i = 0; i < n; i++) {
    struct mrc_ctl_ev_op_entry en;
    memset(&en, 0, sizeof en);
    en.ev = MRC_CTL_EV_UNPOPULATED;
    en.ev_new = evs[i];
    en.state = MRC_CTL_EV_GOOD;
    memset(&ea, 0, sizeof ea);
    ea.ev_op.op = MRC_CTL_EV_OP_REPLACE_EV;
    ea.ev_op.entries = &en;
    ea.ev_op.entry_count = 1;
    if (mrc_ctl_modify_ev_profile(g_ctx, id, &ea, MRC_CTL_EV_PROFILE_EV_OP))
      return ctl_fail("EV profile: REPLACE_EV");
  }
  memset(&ea, 0, sizeof ea);
  ea.profile_state = MRC_CTL_PROFILE_ONLINE;
  if (mrc_ctl_modify_ev_profile(g_ctx, id, &ea, MRC_CTL_EV_PROFILE_STATE))
    return ctl_fail("EV profile to ONLINE");
  return 0;
}

/* NSCC from a CC profile TOML's [nscc] table (`name = number` lines); absent keys keep the
 * values scaled for namespaces on a shared host. */
static int make_cc_profile(void) {
  static struct mrc_ctl_cc_nscc_cfg nscc = {.adjust_bytes_threshold = 32768,
                                            .adjust_period_threshold = 200000,
                                            .base_rtt = 100000,
                                            .eta = 600,
                                            .fi = 1,
                                            .fi_scale = 0.5f,
                                            .gamma = 0.8f,
                                            .max_md_jump = 0.5f,
                                            .max_cwnd = 4194304,
                                            .qa_gate = 3,
                                            .qa_threshold = 20000000,
                                            .target_delay = 2000000};
  if (*cfg.cc_profile) {
    FILE* f = fopen(cfg.cc_profile, "r");
    if (!f) die_usage("%s: cannot read the CC profile: %s", cfg.cc_profile, strerror(errno));
    char line[512], key[64];
    double v;
    while (fgets(line, sizeof line, f)) {
      if (sscanf(line, " %63[a-z_] = %lf", key, &v) != 2) continue;
      if (!strcmp(key, "base_rtt"))
        nscc.base_rtt = (uint32_t)v;
      else if (!strcmp(key, "target_delay"))
        nscc.target_delay = (uint32_t)v;
      else if (!strcmp(key, "qa_threshold"))
        nscc.qa_threshold = (uint32_t)v;
      else if (!strcmp(key, "adjust_period_threshold"))
        nscc.adjust_period_threshold = (uint32_t)v;
      else if (!strcmp(key, "adjust_bytes_threshold"))
        nscc.adjust_bytes_threshold = (uint32_t)v;
      else if (!strcmp(key, "max_cwnd"))
        nscc.max_cwnd = (uint32_t)v;
      else if (!strcmp(key, "eta"))
        nscc.eta = (float)v;
      else if (!strcmp(key, "fi"))
        nscc.fi = (float)v;
      else if (!strcmp(key, "fi_scale"))
        nscc.fi_scale = (float)v;
      else if (!strcmp(key, "gamma"))
        nscc.gamma = (float)v;
      else if (!strcmp(key, "max_md_jump"))
        nscc.max_md_jump = (float)v;
      else if (!strcmp(key, "qa_gate"))
        nscc.qa_gate = (uint8_t)v;
    }
    fclose(f);
  }
  struct mrc_ctl_cc_profile_attr ca;
  memset(&ca, 0, sizeof ca);
  if (!mrc_ctl_query_cc_profile(g_ctx, CC_PROFILE_ID, &ca, MRC_CTL_CC_PROFILE_STATE) &&
      already_online("CC profile", CC_PROFILE_ID, ca.profile_state))
    return 0;
  memset(&ca, 0, sizeof ca);
  ca.profile_state = MRC_CTL_PROFILE_OFFLINE;
  ca.algorithm = "uet-1.0-nscc";
  if (mrc_ctl_modify_cc_profile(g_ctx, CC_PROFILE_ID, &ca,
                                MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM))
    return ctl_fail("CC profile to OFFLINE");
  memset(&ca, 0, sizeof ca);
  ca.profile_state = MRC_CTL_PROFILE_ONLINE;
  ca.cc_config = &nscc;
  if (mrc_ctl_modify_cc_profile(g_ctx, CC_PROFILE_ID, &ca,
                                MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG))
    return ctl_fail("CC profile to ONLINE");
  return 0;
}

/* The controller's part: EV format, EV profiles (one per peer for SRv6, whose EVs are paths
 * to that peer), CC profile, EV event CQ. Without CAP_NET_ADMIN (EPERM) the QPs use the
 * device's defaults and EV counts are not reported. */
static int controller_setup(void) {
  struct mrc_ctl_ev evs[MAX_EVS];
  if (make_format_profile()) return errno == EPERM ? 1 : -1;
  int n = 0;
  if (*cfg.ev_profile) {
    n = read_ev_profile(cfg.ev_profile, evs, MAX_EVS);
  } else if (strcmp(cfg.ev_format, "srv6")) {
    n = generated_evs(evs, MAX_EVS);
  }
  if (n > 0) {
    g_default_profile = EV_PROFILE_BASE;
    if (make_ev_profile(g_default_profile, evs, n) ||
        make_ev_profile(g_default_profile + EV_PROFILE_RESPONDER, evs, n))
      return -1;
  }
  /* MRC_PEER_EV_PROFILES=GID=path,... */
  char* list = strdup(cfg.peer_ev_profiles);
  for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok;
       tok = strtok_r(NULL, ",", &save)) {
    char* eq = strchr(tok, '=');
    if (!eq || g_nprofiles == MAX_PEERS) die_usage("MRC_PEER_EV_PROFILES: bad entry '%s'", tok);
    *eq = '\0';
    struct peer_profile* p = &g_profiles[g_nprofiles];
    if (parse_gid(tok, &p->gid)) die_usage("MRC_PEER_EV_PROFILES: '%s' is not a GID", tok);
    p->id = EV_PROFILE_BASE + 1 + (uint64_t)g_nprofiles;
    int k = read_ev_profile(eq + 1, evs, MAX_EVS);
    if (make_ev_profile(p->id, evs, k) || make_ev_profile(p->id + EV_PROFILE_RESPONDER, evs, k)) {
      free(list);
      return -1;
    }
    g_nprofiles++;
  }
  free(list);
  if (strcmp(cfg.cc, "none")) {
    if (make_cc_profile()) return -1;
    g_have_cc = 1;
  }
  g_ev_cq = mrc_ctl_create_ev_event_cq(g_ctx, 4096, NULL, NULL, 0);
  if (!g_ev_cq) return ctl_fail("mrc_ctl_create_ev_event_cq");
  g_have_profiles = 1;
  return 0;
}

static uint64_t profile_for(const union ibv_gid* peer) {
  for (int i = 0; i < g_nprofiles; i++)
    if (!memcmp(g_profiles[i].gid.raw, peer->raw, 16)) return g_profiles[i].id;
  return g_default_profile;
}

static void poll_ev_events(void) {
  if (!g_ev_cq) return;
  struct mrc_ctl_ev_event evs[64];
  int n;
  while ((n = mrc_ctl_poll_ev_event(g_ev_cq, 64, evs)) > 0) {
    for (int i = 0; i < n; i++) {
      if (evs[i].state == MRC_CTL_EV_ASSUMED_BAD) {
        atomic_fetch_add(&g_ev_retired, 1);
        const uint64_t k = (uint64_t)evs[i].profile_id - EV_PROFILE_BASE;
        if (evs[i].profile_id >= EV_PROFILE_BASE && k < 2 * (MAX_PEERS + 1))
          atomic_fetch_add(&g_ev_retired_by_profile[k], 1);
      }
      log_event("\"kind\":\"ev_state\",\"profile\":%" PRIu64 ",\"port\":%u,\"state\":\"%s\"",
                (uint64_t)evs[i].profile_id, evs[i].ev.port,
                evs[i].state == MRC_CTL_EV_ASSUMED_BAD ? "ASSUMED_BAD" : "GOOD");
    }
  }
}

static int open_device(void) {
  int n = 0;
  struct ibv_device** list = ibv_get_device_list(&n);
  if (!list || n == 0) {
    fprintf(stderr, "mrc-perf: no RDMA device (ibv_get_device_list)\n");
    return -1;
  }
  struct ibv_device* dev = NULL;
  for (int i = 0; i < n && !dev; i++) {
    if (*cfg.device ? !strcmp(ibv_get_device_name(list[i]), cfg.device) : 1) {
      struct ibv_context* c = ibv_open_device(list[i]);
      if (!c) continue;
      struct mrc_device_attr a;
      int supported = 0;
      if (mrc_query_device(c, &a, &supported) == 0 && supported) {
        dev = list[i];
        g_vctx = c;
      } else {
        ibv_close_device(c);
      }
    }
  }
  ibv_free_device_list(list);
  if (!g_vctx) {
    fprintf(stderr, "mrc-perf: no MRC device%s%s (mrc_query_device)\n", *cfg.device ? " " : "",
            cfg.device);
    return -1;
  }
  struct ibv_device_attr da;
  if (ibv_query_device(g_vctx, &da)) return -1;
  g_planes = da.phys_port_cnt;
  if (da.max_qp_wr > 2) g_max_qp_wr = (uint32_t)da.max_qp_wr;
  if (da.max_cqe > 0) g_max_cqe = (uint32_t)da.max_cqe;
  struct ibv_port_attr pa;
  if (ibv_query_port(g_vctx, 1, &pa) == 0) {
    static const uint32_t mtus[] = {0, 256, 512, 1024, 2048, 4096};
    if (pa.active_mtu >= 1 && pa.active_mtu <= 5) g_port_mtu = mtus[pa.active_mtu];
  }
  /* The node GID's RoCE v2 entry: rdma-core lists each address as v1 then v2, so the last
   * entry with the address. Without a GID given: index 3, the OCP benchmark's default. */
  if (cfg.gid_index >= 0) {
    g_gid_index = cfg.gid_index;
    if (ibv_query_gid(g_vctx, 1, g_gid_index, &g_gid)) return -1;
  } else if (*cfg.gid) {
    union ibv_gid want, g;
    if (parse_gid(cfg.gid, &want)) die_usage("GID %s: not an IPv6 address", cfg.gid);
    g_gid_index = -1;
    for (int i = 0; i < 256 && ibv_query_gid(g_vctx, 1, i, &g) == 0; i++)
      if (!memcmp(g.raw, want.raw, 16)) g_gid_index = i;
    if (g_gid_index < 0) {
      fprintf(stderr, "mrc-perf: GID %s is not in port 1's GID table\n", cfg.gid);
      return -1;
    }
    g_gid = want;
  } else {
    g_gid_index = 3;
    if (ibv_query_gid(g_vctx, 1, g_gid_index, &g_gid)) return -1;
  }
  struct mrc_context_attr ca = {.mrc_api_version_used = MRC_API_CURRENT_VERSION};
  g_ctx = mrc_create_context(g_vctx, &ca);
  if (!g_ctx) return -1;
  g_pd = ibv_alloc_pd(g_vctx);
  return g_pd ? 0 : -1;
}

/* ------------------------------------------------------------------------------------------ */
/* one connection                                                                              */
/* ------------------------------------------------------------------------------------------ */
struct conn {
  int client; /* 1: we write (requester), 0: we receive and verify */
  struct chan ch;
  char peer[64];
  char server_addr[64];
  /* plan, settled in the exchange */
  uint64_t size, iters, duration_ns, seed, slots;
  uint32_t qps, tx_depth, pmtu, max_wimm;
  int imm;
  union ibv_gid peer_gid;
  /* verbs objects */
  struct mrc_cq* cq;
  struct mrc_qp* qp[1024];
  uint32_t psn[1024];
  struct remote_qp remote[1024];
  struct ibv_mr* mr;
  uint8_t* buf;
  size_t buf_len;
  /* results */
  uint64_t* completed; /* per QP */
  uint64_t bytes, messages;
  double seconds;
  uint64_t* lat_ns;
  size_t nlat, lat_cap;
  char error[512];
  char peer_error[512];
  uint64_t v_checked, v_bad, v_bytes, imm_expected, imm_received, imm_missing, imm_dup;
  char first_bad[128];
  int have_verify;
  uint8_t** imm_seen;
  uint64_t* imm_seen_cap;
  uint64_t* imm_received_q;
  uint64_t imm_received_total;
  int unsupported;
  uint64_t ev_profile; /* ours, 0: the device's default */
};

static void set_error(struct conn* c, const char* fmt, ...) {
  if (c->error[0]) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->error, sizeof c->error, fmt, ap);
  va_end(ap);
}

static enum ibv_mtu mtu_enum(uint32_t b) {
  return b >= 4096   ? IBV_MTU_4096
         : b >= 2048 ? IBV_MTU_2048
         : b >= 1024 ? IBV_MTU_1024
         : b >= 512  ? IBV_MTU_512
                     : IBV_MTU_256;
}

/* Receives a responder keeps posted per QP for immediates: max_wimm_dest, plus what the
 * requester may have in flight, plus slack for the time between a receive completing and this
 * program reposting it (the requester may send the next immediate as soon as it is acked). */
static uint32_t recv_depth(const struct conn* c) {
  uint32_t n = cfg.wimm + c->tx_depth + 4096;
  return n + 1 > g_max_qp_wr ? g_max_qp_wr - 1 : n;
}

static int create_qps(struct conn* c) {
  uint32_t depth = c->tx_depth + 1;
  /* Room for every completion that can be pending: the sends in flight and every posted
   * receive (an overrun CQ loses completions). */
  uint64_t cqe = (uint64_t)c->qps * (depth + (c->client ? 0 : recv_depth(c)) + 8);
  if (cqe > g_max_cqe) cqe = g_max_cqe;
  c->cq = mrc_create_cq(g_ctx, (int)cqe, NULL, NULL, 0);
  if (!c->cq) return set_error(c, "mrc_create_cq: %s", strerror(errno)), -1;
  uint64_t ev_profile = profile_for(&c->peer_gid);
  if (ev_profile && !c->client) ev_profile += EV_PROFILE_RESPONDER;
  c->ev_profile = ev_profile;
  for (uint32_t q = 0; q < c->qps; q++) {
    struct mrc_qp_init_attr qia = {
        .send_cq = c->cq,
        .recv_cq = c->cq,
        .cap = {.max_send_wr = depth,
                .max_recv_wr = recv_depth(c) + 1,
                .max_send_sge = 1,
                .max_recv_sge = 1},
        .pd = g_pd,
        .send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        .protocol_version = MRC_PROTOCOL_VERSION_1};
    c->qp[q] = mrc_create_qp(g_ctx, &qia);
    if (!c->qp[q]) return set_error(c, "mrc_create_qp: %s", strerror(errno)), -1;
    struct ibv_qp_attr v = {.qp_state = IBV_QPS_INIT,
                            .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE};
    struct mrc_qp_attr m = {
        .profile = {.ev_profile_id = ev_profile, .cc_profile_id = CC_PROFILE_ID}};
    int mmask = (ev_profile ? MRC_QP_EV_PROFILE_ID : 0) | (g_have_cc ? MRC_QP_CC_PROFILE_ID : 0);
    if (mrc_modify_qp(c->qp[q], &v, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS, &m, mmask))
      return set_error(c, "QP to INIT: %s", strerror(errno)), -1;
    c->psn[q] = (uint32_t)(mix(cfg.seed ^ now_ns() ^ q) & 0xFFFFFF);
  }
  c->buf = aligned_alloc(4096, (c->buf_len + 4095) / 4096 * 4096);
  if (!c->buf) return set_error(c, "out of memory (%zu bytes)", c->buf_len), -1;
  memset(c->buf, 0, c->buf_len);
  c->mr = ibv_reg_mr(g_pd, c->buf, c->buf_len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  if (!c->mr) return set_error(c, "ibv_reg_mr: %s", strerror(errno)), -1;
  return 0;
}

static int connect_qps(struct conn* c) {
  for (uint32_t q = 0; q < c->qps; q++) {
    struct ibv_qp_attr v;
    memset(&v, 0, sizeof v);
    v.qp_state = IBV_QPS_RTR;
    v.path_mtu = mtu_enum(c->pmtu);
    v.ah_attr.is_global = 1;
    v.ah_attr.port_num = 1;
    v.ah_attr.grh.sgid_index = (uint8_t)g_gid_index;
    v.ah_attr.grh.dgid = c->peer_gid;
    v.dest_qp_num = c->remote[q].qpn;
    v.rq_psn = c->remote[q].psn;
    struct mrc_qp_attr m;
    memset(&m, 0, sizeof m);
    m.mpr.mpr_dest = (uint16_t)cfg.mpr;
    m.wimm.max_wimm_dest = (uint16_t)cfg.wimm;
    if (mrc_modify_qp(c->qp[q], &v,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
                      &m, MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM_DEST))
      return set_error(c, "QP to RTR: %s", strerror(errno)), -1;
    memset(&v, 0, sizeof v);
    v.qp_state = IBV_QPS_RTS;
    v.sq_psn = c->psn[q];
    memset(&m, 0, sizeof m);
    m.mpr.mpr = (uint16_t)cfg.mpr;
    m.wimm.max_wimm = (uint16_t)(c->max_wimm ? c->max_wimm : cfg.wimm);
    m.timeout = (uint8_t)cfg.timeout;
    m.retry.linear_cnt = (uint8_t)cfg.retry_linear;
    m.retry.exp_cnt = (uint8_t)cfg.retry_exp;
    if (mrc_modify_qp(c->qp[q], &v, IBV_QP_STATE | IBV_QP_SQ_PSN, &m,
                      MRC_QP_MPR | MRC_QP_MAX_WIMM | MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT))
      return set_error(c, "QP to RTS: %s", strerror(errno)), -1;
  }
  return 0;
}

static void qps_json(struct conn* c, char* out, size_t cap, int per_qp_bytes) {
  size_t n = strlen(out);
  n += (size_t)snprintf(out + n, cap - n, "\"qp\":[");
  for (uint32_t q = 0; q < c->qps; q++) {
    uint32_t qpn = 0;
    mrc_get_qpn(c->qp[q], &qpn);
    n += (size_t)snprintf(out + n, cap - n,
                          "%s{\"qpn\":%u,\"psn\":%u,\"rkey\":%u,\"va\":%" PRIu64 "}", q ? "," : "",
                          qpn, c->psn[q], c->mr->rkey,
                          (uint64_t)(uintptr_t)c->buf + (uint64_t)q * (uint64_t)per_qp_bytes);
  }
  snprintf(out + n, cap - n, "]");
}

static void gid_text(const union ibv_gid* g, char* out, size_t cap) {
  inet_ntop(AF_INET6, g->raw, out, (socklen_t)cap);
}

static void destroy(struct conn* c) {
  for (uint32_t q = 0; q < c->qps; q++)
    if (c->qp[q]) mrc_destroy_qp(c->qp[q]);
  if (c->cq) mrc_destroy_cq(c->cq);
  if (c->mr) ibv_dereg_mr(c->mr);
  free(c->buf);
  if (c->ch.fd >= 0) close(c->ch.fd);
  free(c->ch.buf);
}

static void record_latency(struct conn* c, uint64_t ns) {
  if (c->nlat == c->lat_cap) {
    if (c->lat_cap >= (1u << 22)) return;
    c->lat_cap = c->lat_cap ? c->lat_cap * 2 : 4096;
    c->lat_ns = realloc(c->lat_ns, c->lat_cap * sizeof *c->lat_ns);
  }
  c->lat_ns[c->nlat++] = ns;
}

/* After a run of empty polls, sleep a little instead of spinning: a software device's engine
 * runs on a thread of this process that a spinning application would starve of CPU when cores
 * are few (the scenario hosts share the machine's cores). */
static void idle_wait(unsigned* idle) {
  if (++*idle < 8) return;
  struct timespec ts = {0, 100000};
  nanosleep(&ts, NULL);
}

/* Requester: posts WRITEs (or WRITE_WITH_IMMs) on every QP, up to tx_depth outstanding, for
 * iters messages per QP or duration_ns; message m of QP q goes to remote slot m % slots. */
static void client_transfer(struct conn* c) {
  const uint32_t Q = c->qps;
  uint64_t* posted = calloc(Q, sizeof *posted);
  uint64_t* t_post = calloc((size_t)Q * c->tx_depth, sizeof *t_post);
  uint32_t depth = c->tx_depth;
  if (c->imm && c->max_wimm && c->max_wimm < depth) depth = c->max_wimm;
  const uint64_t t0 = now_ns();
  uint64_t last_progress = t0;
  const uint64_t stall_ns = (uint64_t)(cfg.stall_s * 1e9);
  int stop_posting = 0;
  struct ibv_wc wc[64];
  unsigned idle = 0;
  for (;;) {
    const uint64_t t = now_ns();
    if (c->duration_ns && t - t0 >= c->duration_ns) stop_posting = 1;
    int outstanding = 0;
    for (uint32_t q = 0; q < Q; q++) {
      /* Up to --post-list WRs per mrc_post_send call (perftest's --post_list): in device mode
       * every call is a round trip to softmrcd, which a list of N pays once. */
      while (!stop_posting && !c->error[0]) {
        struct ibv_sge sge[MAX_POST_LIST];
        struct ibv_send_wr wr[MAX_POST_LIST], *bad = NULL;
        uint32_t nl = 0;
        while (nl < cfg.post_list && posted[q] + nl - c->completed[q] < depth &&
               (c->iters == 0 || posted[q] + nl < c->iters)) {
          const uint64_t m = posted[q] + nl;
          const uint32_t slot = (uint32_t)(m % c->tx_depth);
          uint8_t* src = c->buf + ((size_t)q * c->tx_depth + slot) * c->size;
          fill_pattern(src, c->size, c->seed + g_seed_skew, q, m);
          sge[nl] = (struct ibv_sge){
              .addr = (uintptr_t)src, .length = (uint32_t)c->size, .lkey = c->mr->lkey};
          memset(&wr[nl], 0, sizeof wr[nl]);
          wr[nl].wr_id = ((uint64_t)q << 40) | m;
          wr[nl].sg_list = &sge[nl];
          wr[nl].num_sge = 1;
          wr[nl].opcode = c->imm ? IBV_WR_RDMA_WRITE_WITH_IMM : IBV_WR_RDMA_WRITE;
          wr[nl].send_flags = IBV_SEND_SIGNALED;
          wr[nl].imm_data = htonl((uint32_t)m);
          wr[nl].wr.rdma.remote_addr = c->remote[q].va + (m % c->slots) * c->size;
          wr[nl].wr.rdma.rkey = c->remote[q].rkey;
          if (nl > 0) wr[nl - 1].next = &wr[nl];
          nl++;
        }
        if (nl == 0) break;
        /* Before the call, as perftest does: a library whose post_send returns late (its thread
         * preempted, an engine lock) may already have the completion queued by then, and the
         * latency would read as a fraction of a microsecond. */
        const uint64_t t_call = now_ns();
        for (uint32_t i = 0; i < nl; i++)
          t_post[(size_t)q * c->tx_depth + (posted[q] + i) % c->tx_depth] = t_call;
        if (mrc_post_send(c->qp[q], wr, &bad)) {
          /* The WRs before the one refused were posted (verbs semantics). */
          if (bad >= wr && bad < wr + nl) posted[q] += (uint64_t)(bad - wr);
          set_error(c, "mrc_post_send on QP %u: %s", q, strerror(errno));
          break;
        }
        posted[q] += nl;
      }
      outstanding += (int)(posted[q] - c->completed[q]);
    }
    const int n = mrc_poll_cq(c->cq, 64, wc);
    if (n < 0) {
      set_error(c, "mrc_poll_cq: %s", strerror(errno));
      break;
    }
    const uint64_t tn = now_ns();
    for (int i = 0; i < n; i++) {
      const uint32_t q = (uint32_t)(wc[i].wr_id >> 40);
      const uint64_t m = wc[i].wr_id & ((1ull << 40) - 1);
      if (q >= Q) continue;
      log_event("\"kind\":\"completion\",\"peer\":\"%s\",\"qp\":%u,\"msg\":%" PRIu64
                ",\"status\":\"%s\"",
                c->peer, q, m, wc_status_name(wc[i].status));
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (wc[i].status != IBV_WC_WR_FLUSH_ERR || !c->error[0])
          set_error(c, "QP %u message %" PRIu64 ": %s", q, m, wc_status_name(wc[i].status));
        stop_posting = 1;
        posted[q] = c->completed[q]; /* flushed: nothing more completes on this QP */
        continue;
      }
      c->completed[q]++;
      c->messages++;
      c->bytes += c->size;
      record_latency(c, tn - t_post[(size_t)q * c->tx_depth + m % c->tx_depth]);
      last_progress = tn;
    }
    if (c->error[0]) stop_posting = 1;
    int done = 1;
    for (uint32_t q = 0; q < Q; q++) {
      if (posted[q] != c->completed[q]) done = 0;
      if (!stop_posting && c->iters && posted[q] < c->iters) done = 0;
      if (!stop_posting && !c->iters) done = 0;
    }
    if (done) break;
    if (outstanding && tn - last_progress > stall_ns) {
      set_error(c, "stalled: no completion for %.1f s", cfg.stall_s);
      break;
    }
    if (n == 0) {
      poll_ev_events();
      idle_wait(&idle);
    } else {
      idle = 0;
    }
  }
  c->seconds = (double)(now_ns() - t0) / 1e9;
  free(posted);
  free(t_post);
}

static int post_imm_recv(struct conn* c, uint32_t q) {
  struct ibv_recv_wr wr = {.wr_id = q}, *bad = NULL;
  if (mrc_post_recv(c->qp[q], &wr, &bad)) {
    set_error(c, "mrc_post_recv on QP %u: %s", q, strerror(errno));
    return -1;
  }
  return 0;
}

static void server_poll(struct conn* c) {
  struct ibv_wc wc[64];
  int n;
  while ((n = mrc_poll_cq(c->cq, 64, wc)) > 0) {
    for (int i = 0; i < n; i++) {
      if (wc[i].status != IBV_WC_SUCCESS) {
        if (wc[i].status != IBV_WC_WR_FLUSH_ERR)
          set_error(c, "receive completion %s", wc_status_name(wc[i].status));
        continue;
      }
      if (wc[i].opcode != IBV_WC_RECV_RDMA_WITH_IMM) continue;
      const uint32_t q = (uint32_t)wc[i].wr_id;
      if (q >= c->qps) continue;
      const uint32_t m = ntohl(wc[i].imm_data);
      if (m < (1u << 28)) {
        if (m >= c->imm_seen_cap[q]) {
          uint64_t cap = c->imm_seen_cap[q] ? c->imm_seen_cap[q] : 1024;
          while (cap <= m) cap *= 2;
          c->imm_seen[q] = realloc(c->imm_seen[q], cap);
          memset(c->imm_seen[q] + c->imm_seen_cap[q], 0, cap - c->imm_seen_cap[q]);
          c->imm_seen_cap[q] = cap;
        }
        if (c->imm_seen[q][m]) c->imm_dup++;
        c->imm_seen[q][m] = 1;
      }
      c->imm_received_q[q]++;
      c->imm_received_total++;
      post_imm_recv(c, q);
    }
  }
  if (n < 0) set_error(c, "mrc_poll_cq: %s", strerror(errno));
}

static void server_verify(struct conn* c, const uint64_t* per_qp) {
  const uint64_t per_qp_bytes = c->slots * c->size;
  for (uint32_t q = 0; q < c->qps; q++) {
    const uint64_t total = per_qp[q];
    const uint64_t n = total < c->slots ? total : c->slots;
    for (uint64_t s = 0; s < n; s++) {
      const uint64_t m = s + ((total - 1 - s) / c->slots) * c->slots;
      c->v_checked++;
      c->v_bytes += c->size;
      long off = check_pattern(c->buf + q * per_qp_bytes + s * c->size, c->size, c->seed, q, m);
      if (off >= 0 && c->v_bad++ == 0)
        snprintf(c->first_bad, sizeof c->first_bad,
                 "qp %u message %" PRIu64 " slot %" PRIu64 " byte %ld", q, m, s, off);
    }
    if (c->imm) {
      c->imm_expected += total;
      c->imm_received += c->imm_received_q[q];
      for (uint64_t m = 0; m < total && m < (1u << 28); m++)
        if (m >= c->imm_seen_cap[q] || !c->imm_seen[q][m]) c->imm_missing++;
    }
  }
  c->have_verify = 1;
}

static void verify_json(struct conn* c, char* out, size_t cap) {
  char fb[256] = "";
  json_escape(fb, sizeof fb, c->first_bad);
  snprintf(out, cap,
           "{\"messages_checked\":%" PRIu64 ",\"messages_bad\":%" PRIu64
           ",\"bytes_checked\":%" PRIu64 ",\"first_bad\":\"%s\",\"imm_expected\":%" PRIu64
           ",\"imm_received\":%" PRIu64 ",\"imm_missing\":%" PRIu64 ",\"imm_duplicates\":%" PRIu64
           "}",
           c->v_checked, c->v_bad, c->v_bytes, fb, c->imm_expected, c->imm_received, c->imm_missing,
           c->imm_dup);
}

static void send_error(struct conn* c) {
  char msg[1200] = "{\"type\":\"error\",\"message\":\"";
  json_escape(msg, sizeof msg - 4, c->error);
  strcat(msg, "\"}");
  chan_send(&c->ch, msg);
}

static const int CTL_TIMEOUT_MS = 30000;

static void serve(struct conn* c) {
  char* line = NULL;
  if (chan_expect(&c->ch, "hello", &line, CTL_TIMEOUT_MS, c->error, sizeof c->error)) return;
  uint64_t version = 0, planes = 0, qps = 0, depth = 0, pmtu = 0, slots = 0;
  char fmt[16] = "", gid[64] = "";
  if (json_u64(line, "version", &version) || json_str(line, "ev_format", fmt, sizeof fmt) ||
      json_u64(line, "planes", &planes) || json_str(line, "gid", gid, sizeof gid) ||
      json_u64(line, "size", &c->size) || json_u64(line, "iters", &c->iters) ||
      json_u64(line, "duration_ns", &c->duration_ns) || json_u64(line, "qps", &qps) ||
      json_u64(line, "tx_depth", &depth) || json_bool(line, "imm", &c->imm) ||
      json_u64(line, "seed", &c->seed) || json_u64(line, "pmtu", &pmtu) ||
      json_u64(line, "slots", &slots)) {
    set_error(c, "bad hello: a field is missing or has the wrong type");
  } else if (version != PROTOCOL_VERSION) {
    set_error(c, "protocol version mismatch");
  } else if (strcmp(fmt, cfg.ev_format)) {
    set_error(c, "EV format %s but the server runs %s", fmt, cfg.ev_format);
  } else if ((int)planes != g_planes) {
    set_error(c, "client has %" PRIu64 " planes, the server %d", planes, g_planes);
  } else if (parse_gid(gid, &c->peer_gid)) {
    set_error(c, "bad GID");
  } else if (c->size == 0 || c->size > 0xFFFFFFFFull || qps == 0 || qps > 1024 || depth == 0 ||
             depth > 16384 || slots == 0) {
    set_error(c, "inconsistent transfer parameters");
  }
  json_str(line, "name", c->peer, sizeof c->peer);
  free(line);
  if (c->error[0]) return send_error(c);
  c->qps = (uint32_t)qps;
  c->tx_depth = (uint32_t)depth;
  c->pmtu = (uint32_t)(pmtu < cfg.pmtu ? pmtu : cfg.pmtu);
  if (c->pmtu > g_port_mtu) c->pmtu = g_port_mtu;
  uint64_t limit = BUFFER_LIMIT_BYTES / c->qps / c->size;
  c->slots = slots < limit ? slots : limit;
  if (c->slots < c->tx_depth && (c->iters == 0 || c->slots < c->iters)) {
    set_error(c, "%" PRIu64 " message slots of %" PRIu64 " bytes fit, fewer than tx_depth %u",
              c->slots, c->size, c->tx_depth);
    return send_error(c);
  }
  c->buf_len = (size_t)(c->qps * c->slots * c->size);
  c->max_wimm = cfg.wimm;
  c->completed = calloc(c->qps, sizeof *c->completed);
  c->imm_seen = calloc(c->qps, sizeof *c->imm_seen);
  c->imm_seen_cap = calloc(c->qps, sizeof *c->imm_seen_cap);
  c->imm_received_q = calloc(c->qps, sizeof *c->imm_received_q);
  if (create_qps(c)) return send_error(c);
  char* msg = malloc(65536 + 128 * c->qps);
  size_t cap = 65536 + 128 * c->qps;
  char me[64];
  gid_text(&g_gid, me, sizeof me);
  snprintf(msg, cap,
           "{\"type\":\"welcome\",\"version\":%d,\"gid\":\"%s\",\"planes\":%d,\"slots\":%" PRIu64
           ",\"pmtu\":%u,\"max_wimm_dest\":%u,\"mpr_dest\":%u,\"name\":\"%s\",",
           PROTOCOL_VERSION, me, g_planes, c->slots, c->pmtu, cfg.wimm, cfg.mpr, cfg.name);
  qps_json(c, msg, cap - 2, (int)(c->slots * c->size));
  strcat(msg, "}");
  int rc = chan_send(&c->ch, msg);
  free(msg);
  if (rc) return set_error(c, "control connection closed sending 'welcome'");
  if (chan_expect(&c->ch, "qps", &line, CTL_TIMEOUT_MS, c->error, sizeof c->error)) return;
  int nq = json_qps(line, c->remote, 1024);
  free(line);
  if (nq != (int)c->qps) {
    set_error(c, "client sent a bad 'qp' list");
    return send_error(c);
  }
  if (connect_qps(c)) return send_error(c);
  if (c->imm)
    for (uint32_t q = 0; q < c->qps; q++)
      for (uint32_t k = 0; k < recv_depth(c); k++)
        if (post_imm_recv(c, q)) return send_error(c);
  if (chan_send(&c->ch, "{\"type\":\"ready\"}")) return set_error(c, "control connection closed");
  /* Receive until the client says done; receives are reposted as soon as they complete (MRC
   * has no RNR: an immediate that finds no receive is fatal for the QP). */
  unsigned idle = 0;
  for (;;) {
    const uint64_t before = c->imm_received_total;
    server_poll(c);
    /* Without immediates nothing needs the CQ in time: wait on the control connection. */
    int r = chan_recv(&c->ch, &line, c->imm ? 0 : 50);
    if (r == -2) {
      if (c->imm_received_total == before)
        idle_wait(&idle);
      else
        idle = 0;
      continue;
    }
    if (r == -1) return set_error(c, "control connection closed before 'done'");
    break;
  }
  char type[32] = "";
  json_str(line, "type", type, sizeof type);
  if (strcmp(type, "done")) {
    free(line);
    return set_error(c, "expected 'done', got '%s'", type);
  }
  json_str(line, "error", c->peer_error, sizeof c->peer_error);
  uint64_t* per_qp = calloc(c->qps, sizeof *per_qp);
  const char* arr = json_find(line, "messages");
  if (arr && *arr == '[') {
    for (uint32_t q = 0; q < c->qps; q++) {
      arr++; /* '[' or ',' */
      while (*arr == ' ') arr++;
      per_qp[q] = strtoull(arr, (char**)&arr, 10);
      while (*arr == ' ') arr++;
      if (*arr != ',') break;
    }
  }
  free(line);
  /* The client's completions mean its writes landed; immediates complete with them. */
  uint64_t until = now_ns() + 200000000ull;
  while (now_ns() < until) {
    server_poll(c);
    uint64_t want = 0, got = 0;
    for (uint32_t q = 0; q < c->qps; q++) want += per_qp[q], got += c->imm_received_q[q];
    if (!c->imm || got >= want) break;
  }
  server_verify(c, per_qp);
  for (uint32_t q = 0; q < c->qps; q++) c->messages += per_qp[q];
  c->bytes = c->messages * c->size;
  free(per_qp);
  char v[1024], err[600] = "";
  verify_json(c, v, sizeof v);
  json_escape(err, sizeof err, c->error);
  char res[2048];
  snprintf(res, sizeof res,
           "{\"type\":\"result\",\"verify\":%s,\"error\":\"%s\",\"retired\":%" PRIu64 "}", v, err,
           (uint64_t)atomic_load(&g_ev_retired));
  chan_send(&c->ch, res);
}

static int tcp_connect(const char* addr, int port, int timeout_ms) {
  struct sockaddr_storage ss;
  socklen_t len;
  memset(&ss, 0, sizeof ss);
  struct sockaddr_in* s4 = (struct sockaddr_in*)&ss;
  struct sockaddr_in6* s6 = (struct sockaddr_in6*)&ss;
  if (inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)port);
    len = sizeof *s4;
  } else if (inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)port);
    len = sizeof *s6;
  } else {
    errno = EINVAL;
    return -1;
  }
  uint64_t until = now_ns() + (uint64_t)timeout_ms * 1000000ull;
  for (;;) {
    int fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr*)&ss, len) == 0) {
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    close(fd);
    if (now_ns() > until) return -1;
    usleep(50000); /* the peer may not listen yet */
  }
}

static void request(struct conn* c) {
  c->ch.fd = tcp_connect(c->server_addr, cfg.port, CTL_TIMEOUT_MS);
  if (c->ch.fd < 0)
    return set_error(c, "connect to %s port %d: %s", c->server_addr, cfg.port, strerror(errno));
  c->size = cfg.size;
  c->iters = cfg.iters;
  c->duration_ns = cfg.duration_ns;
  c->qps = cfg.qps;
  c->tx_depth = cfg.tx_depth;
  c->imm = cfg.imm;
  c->pmtu = cfg.pmtu < g_port_mtu ? cfg.pmtu : g_port_mtu;
  uint64_t limit = BUFFER_LIMIT_BYTES / c->qps / c->size;
  c->slots = c->iters && c->iters < limit ? c->iters : limit;
  if (c->slots < c->tx_depth && (c->iters == 0 || c->slots < c->iters))
    return set_error(c,
                     "%" PRIu64 " message slots of %" PRIu64 " bytes fit, fewer than tx_depth %u",
                     c->slots, c->size, c->tx_depth);
  char me[64];
  gid_text(&g_gid, me, sizeof me);
  char hello[1024];
  snprintf(hello, sizeof hello,
           "{\"type\":\"hello\",\"version\":%d,\"gid\":\"%s\",\"ev_format\":\"%s\",\"planes\":%d,"
           "\"size\":%" PRIu64 ",\"iters\":%" PRIu64 ",\"duration_ns\":%" PRIu64
           ",\"qps\":%u,\"tx_depth\":%u,\"imm\":%s,\"seed\":%" PRIu64
           ",\"pmtu\":%u,\"slots\":%" PRIu64 ",\"mutant\":\"\",\"name\":\"%s\"}",
           PROTOCOL_VERSION, me, cfg.ev_format, g_planes, c->size, c->iters, c->duration_ns, c->qps,
           c->tx_depth, c->imm ? "true" : "false", c->seed, c->pmtu, c->slots, cfg.name);
  if (chan_send(&c->ch, hello)) return set_error(c, "control connection closed sending 'hello'");
  char* line = NULL;
  if (chan_expect(&c->ch, "welcome", &line, CTL_TIMEOUT_MS, c->error, sizeof c->error)) return;
  char gid[64] = "";
  uint64_t slots = 0, pmtu = 0, wimm = 0;
  if (json_str(line, "gid", gid, sizeof gid) || parse_gid(gid, &c->peer_gid) ||
      json_u64(line, "slots", &slots) || json_u64(line, "pmtu", &pmtu) ||
      json_u64(line, "max_wimm_dest", &wimm) || json_qps(line, c->remote, 1024) != (int)c->qps ||
      slots == 0 || slots > c->slots) {
    free(line);
    return set_error(c, "bad welcome from the server");
  }
  char name[64] = "";
  if (json_str(line, "name", name, sizeof name) == 0 && name[0])
    snprintf(c->peer, sizeof c->peer, "%s", name);
  free(line);
  c->slots = slots;
  if (pmtu < c->pmtu) c->pmtu = (uint32_t)pmtu;
  c->max_wimm = (uint32_t)wimm;
  c->buf_len = (size_t)c->qps * c->tx_depth * c->size;
  c->completed = calloc(c->qps, sizeof *c->completed);
  if (create_qps(c) || connect_qps(c)) return send_error(c);
  char* msg = malloc(65536 + 128 * c->qps);
  strcpy(msg, "{\"type\":\"qps\",");
  qps_json(c, msg, 65536 + 128 * c->qps - 2, (int)(c->tx_depth * c->size));
  strcat(msg, "}");
  int rc = chan_send(&c->ch, msg);
  free(msg);
  if (rc) return set_error(c, "control connection closed sending 'qps'");
  if (chan_expect(&c->ch, "ready", &line, CTL_TIMEOUT_MS, c->error, sizeof c->error)) return;
  free(line);
  client_transfer(c);
  /* done: per-QP counts, then the server's verification */
  char done[65536];
  size_t n = (size_t)snprintf(done, sizeof done, "{\"type\":\"done\",\"messages\":[");
  for (uint32_t q = 0; q < c->qps && n < sizeof done - 64; q++)
    n += (size_t)snprintf(done + n, sizeof done - n, "%s%" PRIu64, q ? "," : "", c->completed[q]);
  char err[600] = "";
  json_escape(err, sizeof err, c->error);
  snprintf(done + n, sizeof done - n, "],\"seconds\":%.6f,\"error\":\"%s\"}", c->seconds, err);
  if (chan_send(&c->ch, done)) {
    snprintf(c->peer_error, sizeof c->peer_error, "control connection closed sending 'done'");
    return;
  }
  if (chan_expect(&c->ch, "result", &line, 60000, c->peer_error, sizeof c->peer_error)) return;
  const char* v = json_find(line, "verify");
  if (v && *v == '{') {
    const char* end = strchr(v, '}');
    char vobj[1024];
    size_t len = end ? (size_t)(end - v + 1) : 0;
    if (len && len < sizeof vobj) {
      memcpy(vobj, v, len);
      vobj[len] = '\0';
      /* json_find looks at depth 1: wrap nothing, the object is its own top level */
      json_u64(vobj, "messages_checked", &c->v_checked);
      json_u64(vobj, "messages_bad", &c->v_bad);
      json_u64(vobj, "bytes_checked", &c->v_bytes);
      json_str(vobj, "first_bad", c->first_bad, sizeof c->first_bad);
      json_u64(vobj, "imm_expected", &c->imm_expected);
      json_u64(vobj, "imm_received", &c->imm_received);
      json_u64(vobj, "imm_missing", &c->imm_missing);
      json_u64(vobj, "imm_duplicates", &c->imm_dup);
      c->have_verify = 1;
    }
  }
  json_str(line, "error", c->peer_error, sizeof c->peer_error);
  free(line);
}

static int conn_ok(const struct conn* c) {
  return !c->error[0] && !c->peer_error[0] && c->have_verify && c->v_checked > 0 && c->v_bad == 0 &&
         (!c->imm || (c->imm_missing == 0 && c->imm_dup == 0));
}

static int cmp_u64(const void* a, const void* b) {
  uint64_t x = *(const uint64_t*)a, y = *(const uint64_t*)b;
  return x < y ? -1 : x > y;
}

static uint64_t conn_retired(const struct conn* c) {
  if (c->ev_profile < EV_PROFILE_BASE || c->ev_profile - EV_PROFILE_BASE >= 2 * (MAX_PEERS + 1))
    return 0;
  return (uint64_t)atomic_load(&g_ev_retired_by_profile[c->ev_profile - EV_PROFILE_BASE]);
}

/* One connection's result object (the DUT contract's fields). */
static void conn_json(struct conn* c, char* out, size_t cap) {
  char v[1024], err[600] = "", perr[600] = "", fb[256] = "";
  json_escape(err, sizeof err, c->error);
  json_escape(perr, sizeof perr, c->peer_error);
  json_escape(fb, sizeof fb, c->first_bad);
  snprintf(v, sizeof v,
           "{\"messages_checked\":%" PRIu64 ",\"messages_bad\":%" PRIu64
           ",\"bytes_checked\":%" PRIu64 ",\"first_bad\":\"%s\",\"imm\":{\"expected\":%" PRIu64
           ",\"received\":%" PRIu64 ",\"missing\":%" PRIu64 ",\"duplicates\":%" PRIu64 "}}",
           c->v_checked, c->v_bad, c->v_bytes, fb, c->imm_expected, c->imm_received, c->imm_missing,
           c->imm_dup);
  char lat[256] = "";
  if (c->nlat) {
    qsort(c->lat_ns, c->nlat, sizeof *c->lat_ns, cmp_u64);
    snprintf(lat, sizeof lat,
             ",\"latency_us\":{\"min\":%.2f,\"p50\":%.2f,\"p99\":%.2f,\"p999\":%.2f,\"max\":%.2f}",
             c->lat_ns[0] / 1e3, c->lat_ns[c->nlat / 2] / 1e3, c->lat_ns[c->nlat * 99 / 100] / 1e3,
             c->lat_ns[c->nlat * 999 / 1000] / 1e3, c->lat_ns[c->nlat - 1] / 1e3);
  }
  const double gbps = c->seconds > 0 ? (double)c->bytes * 8 / c->seconds / 1e9 : 0;
  snprintf(out, cap,
           "{\"role\":\"%s\",\"peer\":\"%s\",\"op\":\"%s\",\"size\":%" PRIu64
           ",\"qps\":%u,"
           "\"tx_depth\":%u,\"bytes\":%" PRIu64 ",\"messages\":%" PRIu64
           ",\"seconds\":%.6f,"
           "\"gbit_per_s\":%.4f,\"msg_per_s\":%.1f%s,\"error\":\"%s\",\"peer_error\":\"%s\","
           "\"verify\":%s%s,\"ev\":{\"retired\":%" PRIu64 "},\"ok\":%s}",
           c->client ? "client" : "server", c->peer, c->imm ? "write_with_imm" : "write", c->size,
           c->qps, c->tx_depth, c->bytes, c->messages, c->seconds, gbps,
           c->seconds > 0 ? (double)c->messages / c->seconds : 0, lat, err, perr,
           c->have_verify ? v : "null", c->unsupported ? ",\"unsupported\":\"see error\"" : "",
           conn_retired(c), conn_ok(c) ? "true" : "false");
}

/* ------------------------------------------------------------------------------------------ */
/* threads                                                                                     */
/* ------------------------------------------------------------------------------------------ */
static atomic_int g_running;

static void* conn_thread(void* arg) {
  struct conn* c = arg;
  if (c->client)
    request(c);
  else
    serve(c);
  atomic_fetch_sub(&g_running, 1);
  return NULL;
}

static int listen_socket(void) {
  const char* addr = *cfg.listen_addr ? cfg.listen_addr : "0.0.0.0";
  int v6 = strchr(addr, ':') != NULL;
  int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (v6) {
    struct sockaddr_in6* s6 = (struct sockaddr_in6*)&ss;
    s6->sin6_family = AF_INET6;
    s6->sin6_port = htons((uint16_t)cfg.port);
    inet_pton(AF_INET6, addr, &s6->sin6_addr);
    len = sizeof *s6;
  } else {
    struct sockaddr_in* s4 = (struct sockaddr_in*)&ss;
    s4->sin_family = AF_INET;
    s4->sin_port = htons((uint16_t)cfg.port);
    if (inet_pton(AF_INET, addr, &s4->sin_addr) != 1) die_usage("listen address %s", addr);
    len = sizeof *s4;
  }
  if (bind(fd, (struct sockaddr*)&ss, len) || listen(fd, 64)) {
    fprintf(stderr, "mrc-perf: listen on %s port %d: %s\n", addr, cfg.port, strerror(errno));
    return -1;
  }
  return fd;
}

static void usage(FILE* f) {
  fprintf(
      f,
      "usage: mrc-perf --dut                      (the DUT contract: MRC_* environment)\n"
      "       mrc-perf server [options]           (accepts clients until killed, or --clients N)\n"
      "       mrc-perf client SERVER [options]    (SERVER: the server's IPv4/IPv6 control "
      "address)\n"
      "options:\n"
      "  --test write_bw|write_lat|write_imm   (write_lat: tx-depth 1, latency percentiles)\n"
      "  --size BYTES  --sweep MIN:MAX   message size, or a sweep over powers of two\n"
      "  --iters N | --duration S        messages per QP, or seconds\n"
      "  --qps N  --tx-depth N  --post-list N (WRs per post call, <= 64)  --port P\n"
      "  --device NAME  --gid IPV6  --gid-index N\n"
      "  --ev-format stev|srv6|udp  --evs-per-plane N  --ev-profile TOML  --cc-profile TOML\n"
      "  --mpr N  --wimm N  --timeout T  --retry LIN:EXP  --pmtu BYTES  --seed N\n"
      "  --listen ADDR  --clients N  --stall S  --event-log FILE  --result FILE\n"
      "Prints one JSON object (per connection in client/server mode). Exit 0: every transfer\n"
      "completed and verified; 1: a failure; 2: usage; 69: not supported.\n");
}

static void config_from_args(int argc, char** argv) {
  int i = 1;
  if (i < argc && (!strcmp(argv[i], "server") || !strcmp(argv[i], "client")))
    cfg.role = argv[i++];
  else
    die_usage("give --dut, server or client (mrc-perf --help)");
  if (!strcmp(cfg.role, "client")) {
    if (i >= argc) die_usage("client: the server's control address is required");
    snprintf(cfg.servers[0].addr, sizeof cfg.servers[0].addr, "%s", argv[i++]);
    cfg.nservers = 1;
    cfg.clients = 0;
  }
  for (; i < argc; i++) {
    const char* o = argv[i];
    if (i + 1 >= argc) die_usage("%s: needs a value", o);
    const char* v = argv[++i];
    if (!strcmp(o, "--test")) {
      if (!strcmp(v, "write_lat"))
        cfg.tx_depth = 1;
      else if (!strcmp(v, "write_imm"))
        cfg.imm = 1;
      else if (strcmp(v, "write_bw"))
        die_usage("--test %s: write_bw, write_lat or write_imm", v);
    } else if (!strcmp(o, "--size"))
      cfg.size = parse_u64(o, v, 1, 1ull << 30);
    else if (!strcmp(o, "--sweep")) {
      char a[32], b[32];
      if (sscanf(v, "%31[^:]:%31s", a, b) != 2) die_usage("--sweep %s: MIN:MAX", v);
      cfg.sweep_min = parse_u64(o, a, 1, 1ull << 30);
      cfg.sweep_max = parse_u64(o, b, cfg.sweep_min, 1ull << 30);
    } else if (!strcmp(o, "--iters"))
      cfg.iters = parse_u64(o, v, 1, 1ull << 40), cfg.duration_ns = 0;
    else if (!strcmp(o, "--duration"))
      cfg.duration_ns = (uint64_t)(atof(v) * 1e9), cfg.iters = 0;
    else if (!strcmp(o, "--qps"))
      cfg.qps = (uint32_t)parse_u64(o, v, 1, 1024);
    else if (!strcmp(o, "--tx-depth"))
      cfg.tx_depth = (uint32_t)parse_u64(o, v, 1, 16384);
    else if (!strcmp(o, "--post-list"))
      cfg.post_list = (uint32_t)parse_u64(o, v, 1, MAX_POST_LIST);
    else if (!strcmp(o, "--port"))
      cfg.port = (int)parse_u64(o, v, 1, 65535);
    else if (!strcmp(o, "--device"))
      cfg.device = v;
    else if (!strcmp(o, "--gid"))
      cfg.gid = v;
    else if (!strcmp(o, "--gid-index"))
      cfg.gid_index = (int)parse_u64(o, v, 0, 255);
    else if (!strcmp(o, "--ev-format"))
      cfg.ev_format = v;
    else if (!strcmp(o, "--evs-per-plane"))
      cfg.evs_per_plane = (int)parse_u64(o, v, 1, 256);
    else if (!strcmp(o, "--ev-profile"))
      cfg.ev_profile = v;
    else if (!strcmp(o, "--cc-profile"))
      cfg.cc_profile = v;
    else if (!strcmp(o, "--mpr"))
      cfg.mpr = (uint32_t)parse_u64(o, v, 1, 65535);
    else if (!strcmp(o, "--wimm"))
      cfg.wimm = (uint32_t)parse_u64(o, v, 1, 65535);
    else if (!strcmp(o, "--timeout"))
      cfg.timeout = (uint32_t)parse_u64(o, v, 1, 31);
    else if (!strcmp(o, "--retry")) {
      unsigned a, b;
      if (sscanf(v, "%u:%u", &a, &b) != 2) die_usage("--retry %s: LINEAR:EXP", v);
      cfg.retry_linear = a, cfg.retry_exp = b;
    } else if (!strcmp(o, "--pmtu"))
      cfg.pmtu = (uint32_t)parse_u64(o, v, 256, 4096);
    else if (!strcmp(o, "--seed"))
      cfg.seed = parse_u64(o, v, 0, UINT64_MAX);
    else if (!strcmp(o, "--listen"))
      cfg.listen_addr = v;
    else if (!strcmp(o, "--clients"))
      cfg.clients = (int)parse_u64(o, v, 1, MAX_PEERS);
    else if (!strcmp(o, "--stall"))
      cfg.stall_s = atof(v);
    else if (!strcmp(o, "--event-log"))
      cfg.event_log = v;
    else if (!strcmp(o, "--result"))
      cfg.result_path = v;
    else
      die_usage("unknown option %s (mrc-perf --help)", o);
  }
  if (strcmp(cfg.ev_format, "stev") && strcmp(cfg.ev_format, "srv6") &&
      strcmp(cfg.ev_format, "udp"))
    die_usage("--ev-format %s: stev, srv6 or udp", cfg.ev_format);
}

int main(int argc, char** argv) {
  if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
    usage(stdout);
    return EXIT_OK;
  }
  g_seed_skew = strtoull(env_or("MRCPERF_TEST_SEED_SKEW", "0"), NULL, 10);
  const int dut = argc >= 2 && !strcmp(argv[1], "--dut");
  /* The DUT contract's script mode (MRC_ROLE=script): script_serve.c. */
  if (dut && !strcmp(env_or("MRC_ROLE", ""), "script")) return mrc_perf_script_main();
  if (dut)
    config_from_env();
  else
    config_from_args(argc, argv);
  if (*cfg.event_log) {
    g_log = fopen(cfg.event_log, "w");
    if (!g_log) die_usage("%s: %s", cfg.event_log, strerror(errno));
  }
  if (open_device()) {
    fprintf(stderr, "mrc-perf: opening the device failed: %s\n", strerror(errno));
    return EXIT_FAILED;
  }
  int cs = controller_setup();
  if (cs < 0) return EXIT_FAILED;
  if (cs > 0)
    fprintf(stderr, "mrc-perf: no CAP_NET_ADMIN: the device's default EV and CC profiles\n");

  int lfd = -1;
  if (cfg.clients != 0 && (lfd = listen_socket()) < 0) return EXIT_FAILED;

  /* Connections: the requester side of each server, then every accepted client. A sweep runs
   * one connection per size, one after the other. */
  struct conn* conns[MAX_PEERS * 2 + 64];
  pthread_t th[MAX_PEERS * 2 + 64];
  int nconns = 0;
  uint64_t sizes[64];
  int nsizes = 0;
  if (cfg.sweep_min) {
    for (uint64_t s = cfg.sweep_min; s <= cfg.sweep_max && nsizes < 64; s *= 2) sizes[nsizes++] = s;
  } else {
    sizes[nsizes++] = cfg.size;
  }
  int all_ok = 1;
  FILE* out = stdout;
  char* text = malloc(1 << 20);
  size_t tlen = 0;
  text[0] = '\0';
  const int node = !strcmp(cfg.role, "node");
  for (int si = 0; si < (cfg.nservers ? nsizes : 1); si++) {
    cfg.size = sizes[si];
    int first = nconns;
    for (int k = 0; k < cfg.nservers; k++) {
      struct conn* c = calloc(1, sizeof *c);
      c->client = 1;
      c->ch.fd = -1;
      c->seed = node ? cfg.seed * 1000003ull + (uint64_t)k * 7919 + 1 : cfg.seed;
      snprintf(c->peer, sizeof c->peer, "%s", cfg.servers[k].node);
      snprintf(c->server_addr, sizeof c->server_addr, "%s", cfg.servers[k].addr);
      conns[nconns] = c;
      atomic_fetch_add(&g_running, 1);
      pthread_create(&th[nconns], NULL, conn_thread, c);
      nconns++;
    }
    /* Accept clients while the requester threads run (all-to-all needs both at once). */
    int accepted = 0;
    while (lfd >= 0 && (cfg.clients < 0 || accepted < cfg.clients)) {
      struct pollfd pfd = {.fd = lfd, .events = POLLIN};
      poll_ev_events();
      if (poll(&pfd, 1, 20) <= 0) continue;
      int fd = accept(lfd, NULL, NULL);
      if (fd < 0) continue;
      int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      struct conn* c = calloc(1, sizeof *c);
      c->ch.fd = fd;
      if (cfg.clients < 0) {
        /* standalone server: one client after another, forever */
        serve(c);
        char one_json[4096];
        conn_json(c, one_json, sizeof one_json);
        printf("%s\n", one_json);
        fflush(stdout);
        destroy(c);
        free(c);
        continue;
      }
      conns[nconns] = c;
      atomic_fetch_add(&g_running, 1);
      pthread_create(&th[nconns], NULL, conn_thread, c);
      nconns++;
      accepted++;
    }
    while (atomic_load(&g_running) > 0) {
      poll_ev_events();
      usleep(2000);
    }
    poll_ev_events();
    for (int k = first; k < nconns; k++) pthread_join(th[k], NULL);
  }
  /* Results: one object per connection; node mode wraps them in {"connections": [...]}. */
  for (int k = 0; k < nconns; k++) {
    char one[4096];
    conn_json(conns[k], one, sizeof one);
    all_ok &= conn_ok(conns[k]);
    if (!conns[k]->client && !conns[k]->error[0] && conns[k]->have_verify) {
      /* the server's verdict is its own verification */
    }
    tlen += (size_t)snprintf(text + tlen, (1 << 20) - tlen, "%s%s", k ? "," : "", one);
  }
  char* final = malloc(tlen + 512);
  if (node || nconns != 1) {
    snprintf(final, tlen + 512, "{\"role\":\"%s\",\"name\":\"%s\",\"connections\":[%s],\"ok\":%s}",
             cfg.role, cfg.name, text, all_ok ? "true" : "false");
  } else {
    snprintf(final, tlen + 512, "%s", text);
  }
  fprintf(out, "%s\n", final);
  fflush(out);
  if (*cfg.result_path) {
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", cfg.result_path);
    FILE* f = fopen(tmp, "w");
    if (f) {
      fprintf(f, "%s\n", final);
      fclose(f);
      rename(tmp, cfg.result_path);
    }
  }
  if (g_log) fclose(g_log);
  for (int k = 0; k < nconns; k++) destroy(conns[k]);
  return all_ok ? EXIT_OK : EXIT_FAILED;
}
