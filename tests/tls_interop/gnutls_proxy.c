/* A TLS-terminating proxy on GnuTLS (ScyllaDB's TLS library), for
 * tests/tls_interop.rs. It listens on a loopback port; for each connection
 * (one process each) it runs a GnuTLS server handshake with the given
 * certificate, key and priority string, connects to the backend's plain CQL
 * port and forwards bytes both ways.
 *
 *   gnutls_proxy --backend 127.0.0.1:9042 --cert server.pem --key server.key
 *                --priority 'NORMAL:-VERS-ALL:+VERS-TLS1.3' [--listen ADDR:PORT]
 *                [--key-update-every N]
 *
 * --key-update-every N: a TLS 1.3 KeyUpdate after every N bytes sent to the
 * client. It also asks for the client's KeyUpdate (GNUTLS_KU_PEER) when the
 * previous request was answered and at least 150 ms ago: GnuTLS fails a
 * connection whose peer sends more than 8 KeyUpdates in a second
 * (lib/tls13/key_update.c, KEY_UPDATES_PER_WINDOW).
 *
 * Output (stdout, one write a line): "listening PORT", then, as each
 * connection ends, "conn desc=... resumed=0|1 to_client=B from_client=B
 * key_updates=K requested=R client_key_updates=C end=WHY".
 * SIGTERM or SIGINT: every connection process is ended and waited for, then
 * exit 0. Connection processes also end when the listener dies (even killed).
 *
 * Build: cc -O2 -o gnutls_proxy gnutls_proxy.c $(pkg-config --cflags --libs gnutls)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <gnutls/gnutls.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CHILDREN 256

static volatile sig_atomic_t stop;
/* Set during a handshake, which may block in a read begun before the
 * signal: the signal ends the process at once. */
static volatile sig_atomic_t exit_on_signal;
static unsigned long client_key_updates;

static void on_signal(int sig) {
    (void)sig;
    if (exit_on_signal) _exit(0);
    stop = 1;
}

static void die(const char *what, const char *detail) {
    fprintf(stderr, "gnutls_proxy: %s: %s\n", what, detail);
    exit(2);
}

/* One line on stdout in one write (atomic on a pipe: under PIPE_BUF). */
static void say(const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof line) n = sizeof line - 1;
    if (write(STDOUT_FILENO, line, n) < 0) { /* nobody reads: nothing to do */ }
}

static void parse_addr(const char *s, struct sockaddr_in *a) {
    char host[64];
    const char *colon = strrchr(s, ':');
    if (!colon || (size_t)(colon - s) >= sizeof host) die("bad address", s);
    memcpy(host, s, colon - s);
    host[colon - s] = 0;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((unsigned short)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &a->sin_addr) != 1) die("bad IPv4 address", s);
}

/* Counts the client's KeyUpdates (called after GnuTLS processed each). */
static int on_key_update(gnutls_session_t s, unsigned htype, unsigned when,
                         unsigned incoming, const gnutls_datum_t *msg) {
    (void)s; (void)htype; (void)when; (void)msg;
    if (incoming) client_key_updates++;
    return 0;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* One connection: handshake, then forwarding until either side ends. */
static void serve(int client, const struct sockaddr_in *backend_addr,
                  gnutls_certificate_credentials_t cred, const char *priority,
                  const gnutls_datum_t *ticket_key, unsigned long ku_every) {
    static char buf[64 * 1024];
    char why[160] = "eof";
    unsigned long long to_client = 0, from_client = 0, since_update = 0;
    unsigned long key_updates = 0, requested = 0;
    double asked_at = 0;
    int backend = -1, ret, one = 1, failed = 1;
    gnutls_session_t s;

    if (gnutls_init(&s, GNUTLS_SERVER) < 0) die("gnutls_init", "failed");
    if ((ret = gnutls_priority_set_direct(s, priority, NULL)) < 0)
        die(priority, gnutls_strerror(ret));
    gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, cred);
    gnutls_session_ticket_enable_server(s, ticket_key);
    gnutls_handshake_set_hook_function(s, GNUTLS_HANDSHAKE_KEY_UPDATE,
                                       GNUTLS_HOOK_POST, on_key_update);
    gnutls_transport_set_int(s, client);
    gnutls_handshake_set_timeout(s, 20000);
    exit_on_signal = 1;
    if (stop) _exit(0);
    do {
        ret = gnutls_handshake(s);
    } while (ret < 0 && !gnutls_error_is_fatal(ret));
    exit_on_signal = 0;
    if (ret < 0) {
        snprintf(why, sizeof why, "handshake:%s", gnutls_strerror(ret));
        goto out;
    }
    backend = socket(AF_INET, SOCK_STREAM, 0);
    if (backend < 0 || connect(backend, (const struct sockaddr *)backend_addr,
                               sizeof *backend_addr) < 0) {
        snprintf(why, sizeof why, "backend-connect:%s", strerror(errno));
        goto out;
    }
    setsockopt(backend, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

    while (!stop) {
        struct pollfd p[2] = {{client, POLLIN, 0}, {backend, POLLIN, 0}};
        /* Records GnuTLS already holds count as readable. The timeout
         * bounds the wait for a signal that came just before poll. */
        int pending = gnutls_record_check_pending(s) > 0;
        if (poll(p, 2, pending ? 0 : 200) < 0 && errno != EINTR) {
            snprintf(why, sizeof why, "poll:%s", strerror(errno));
            goto out;
        }
        if (pending || (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
            ssize_t n = gnutls_record_recv(s, buf, sizeof buf);
            if (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED) continue;
            if (n == 0 || n == GNUTLS_E_PREMATURE_TERMINATION) {
                snprintf(why, sizeof why, n == 0 ? "close_notify" : "eof");
                failed = 0;
                goto out;
            }
            if (n < 0) {
                snprintf(why, sizeof why, "recv:%s", gnutls_strerror((int)n));
                goto out;
            }
            from_client += n;
            for (ssize_t off = 0, w; off < n; off += w) {
                if ((w = write(backend, buf + off, n - off)) <= 0) {
                    snprintf(why, sizeof why, "backend-write:%s", strerror(errno));
                    goto out;
                }
            }
        }
        if (!(p[1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t n = read(backend, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            snprintf(why, sizeof why, "backend-closed");
            gnutls_bye(s, GNUTLS_SHUT_WR);
            failed = 0;
            goto out;
        }
        for (ssize_t off = 0; off < n;) {
            size_t chunk = n - off;
            if (ku_every && chunk > ku_every - since_update) chunk = ku_every - since_update;
            ssize_t w = gnutls_record_send(s, buf + off, chunk);
            if (w == GNUTLS_E_AGAIN || (w == GNUTLS_E_INTERRUPTED && !stop)) continue;
            if (w < 0) {
                snprintf(why, sizeof why, "send:%s", gnutls_strerror((int)w));
                goto out;
            }
            off += w;
            to_client += w;
            since_update += w;
            if (!ku_every || since_update < ku_every) continue;
            since_update = 0;
            unsigned flags = 0;
            if (requested == client_key_updates && now_s() - asked_at >= 0.15) {
                flags = GNUTLS_KU_PEER;
                asked_at = now_s();
            }
            do {
                ret = gnutls_session_key_update(s, flags);
            } while (ret == GNUTLS_E_AGAIN || (ret == GNUTLS_E_INTERRUPTED && !stop));
            if (ret < 0) {
                snprintf(why, sizeof why, "key-update:%s", gnutls_strerror(ret));
                goto out;
            }
            key_updates++;
            requested += flags ? 1 : 0;
        }
    }
    snprintf(why, sizeof why, "sigterm");
    failed = 0;
out:;
    char *desc = gnutls_session_get_desc(s);
    say("conn desc=%s resumed=%d to_client=%llu from_client=%llu key_updates=%lu "
        "requested=%lu client_key_updates=%lu end=%s\n",
        desc ? desc : "none", gnutls_session_is_resumed(s), to_client, from_client,
        key_updates, requested, client_key_updates, why);
    if (failed && !stop) fprintf(stderr, "gnutls_proxy: a connection failed: %s\n", why);
    gnutls_free(desc);
    gnutls_deinit(s);
    if (backend >= 0) close(backend);
    close(client);
}

int main(int argc, char **argv) {
    const char *listen_at = "127.0.0.1:0", *backend_at = NULL, *cert = NULL,
               *key = NULL, *priority = NULL;
    unsigned long ku_every = 0;
    static const struct option opts[] = {
        {"listen", required_argument, 0, 'l'}, {"backend", required_argument, 0, 'b'},
        {"cert", required_argument, 0, 'c'},   {"key", required_argument, 0, 'k'},
        {"priority", required_argument, 0, 'p'},
        {"key-update-every", required_argument, 0, 'u'}, {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'l': listen_at = optarg; break;
        case 'b': backend_at = optarg; break;
        case 'c': cert = optarg; break;
        case 'k': key = optarg; break;
        case 'p': priority = optarg; break;
        case 'u': ku_every = strtoul(optarg, NULL, 10); break;
        default: die("usage", "see the comment at the top of gnutls_proxy.c");
        }
    }
    if (!backend_at || !cert || !key || !priority)
        die("usage", "--backend, --cert, --key and --priority are required");
    struct sockaddr_in listen_addr, backend_addr;
    parse_addr(listen_at, &listen_addr);
    parse_addr(backend_at, &backend_addr);

    int ret;
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t ticket_key;
    if ((ret = gnutls_global_init()) < 0) die("gnutls_global_init", gnutls_strerror(ret));
    gnutls_certificate_allocate_credentials(&cred);
    if ((ret = gnutls_certificate_set_x509_key_file(cred, cert, key, GNUTLS_X509_FMT_PEM)) < 0)
        die(cert, gnutls_strerror(ret));
    /* One session ticket key for all connections: later ones can resume. */
    if ((ret = gnutls_session_ticket_key_generate(&ticket_key)) < 0)
        die("ticket key", gnutls_strerror(ret));

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: blocking calls see EINTR */
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (l < 0 || bind(l, (struct sockaddr *)&listen_addr, sizeof listen_addr) < 0 ||
        listen(l, 64) < 0)
        die(listen_at, strerror(errno));
    socklen_t len = sizeof listen_addr;
    getsockname(l, (struct sockaddr *)&listen_addr, &len);
    say("listening %u\n", ntohs(listen_addr.sin_port));

    pid_t children[MAX_CHILDREN], parent = getpid();
    int nchildren = 0;
    while (!stop) {
        for (int i = 0; i < nchildren;) /* reap the connections that ended */
            if (waitpid(children[i], NULL, WNOHANG) == children[i])
                children[i] = children[--nchildren];
            else
                i++;
        struct pollfd p = {l, POLLIN, 0};
        if (poll(&p, 1, 200) <= 0) continue; /* timeout or EINTR: check stop */
        int c = accept(l, NULL, NULL);
        if (c < 0) continue;
        pid_t pid = nchildren < MAX_CHILDREN ? fork() : -1;
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* ends with the listener */
            if (getppid() != parent) _exit(0);
            close(l);
            serve(c, &backend_addr, cred, priority, &ticket_key, ku_every);
            _exit(0);
        }
        close(c);
        if (pid > 0) children[nchildren++] = pid;
    }
    close(l);
    for (int i = 0; i < nchildren; i++) kill(children[i], SIGTERM);
    for (int i = 0; i < nchildren; i++)
        while (waitpid(children[i], NULL, 0) < 0 && errno == EINTR) {}
    gnutls_free(ticket_key.data);
    gnutls_certificate_free_credentials(cred);
    gnutls_global_deinit();
    return 0;
}
