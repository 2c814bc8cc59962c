/* const_server.c -- the smallest useful libmicrohttpd server: reads any
 * request (body included) and answers a constant JSON body. The bench
 * measures it next to attention-server, with the same daemon flags, as the
 * ceiling of what libmicrohttpd does on this machine.
 *
 * Usage: const_server PORT   (0 picks one; prints "port N" on stdout) */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char body[] = "{\"output\":[[0.5,0.5]],\"num_heads\":1}";

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload, size_t *upload_size, void **state)
{
    (void)cls, (void)url, (void)method, (void)version, (void)upload;
    if (!*state) { /* first call: headers only */
        *state = (void *)1;
        return MHD_YES;
    }
    if (*upload_size) { /* drop the body */
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *r = MHD_create_response_from_buffer(
        sizeof body - 1, (void *)body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

int main(int argc, char **argv)
{
    int port = argc > 1 ? atoi(argv[1]) : 0;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGTERM);
    sigaddset(&s, SIGINT);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    struct MHD_Daemon *d = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME,
        (uint16_t)port, NULL, NULL, on_request, NULL, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_END);
    if (!d)
        return 1;
    printf("port %u\n", MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT)->port);
    fflush(stdout);
    int sig;
    sigwait(&s, &sig);
    MHD_stop_daemon(d);
    return 0;
}
