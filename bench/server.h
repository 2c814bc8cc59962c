/* server.h -- an attention-server for the C benchmarks that talk to one
 * (bench_grpc.c), as serverproc.py starts it for the Python ones: on free
 * loopback ports, its log in a file, stopped (SIGTERM) at exit.
 * Header-only (static): each bench is one .c file plus what it measures. */
#ifndef BENCH_SERVER_H
#define BENCH_SERVER_H

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static pid_t server_pid;

static void stop_server(void)
{
    if (server_pid > 0) {
        kill(server_pid, SIGTERM);
        waitpid(server_pid, NULL, 0);
        server_pid = 0;
    }
}

/* A loopback port nothing listens on now (gRPC's port 0 means off). */
static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &n) != 0) {
        fprintf(stderr, "bench: no free port\n");
        exit(1);
    }
    close(fd);
    return ntohs(a.sin_port);
}

/* Starts server (its defaults, --log-level warn) with models as its
 * repository and gRPC on grpc_port (0: the flag left out, for a server
 * without gRPC), its log in log; returns its HTTP port. */
static int start_server(const char *server, const char *models, int grpc_port, const char *log)
{
    char gp[16];
    snprintf(gp, sizeof gp, "%d", grpc_port);
    server_pid = fork();
    if (server_pid < 0) {
        perror("bench: fork");
        exit(1);
    }
    if (server_pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int null = open("/dev/null", O_WRONLY);
        if (fd < 0 || null < 0)
            _exit(127);
        dup2(fd, 2);
        dup2(null, 1);
        char *argv[] = {(char *)server, "--port", "0", "--bind", "127.0.0.1", "--log-level", "warn",
                        "--model-repository", (char *)models, "--grpc-port", gp, NULL};
        if (grpc_port == 0)
            argv[9] = NULL; /* HTTP only */
        execv(server, argv);
        _exit(127);
    }
    atexit(stop_server);
    for (int i = 0; i < 400; i++) {
        usleep(50000);
        FILE *f = fopen(log, "r");
        char line[1024];
        int port = 0;
        while (f && fgets(line, sizeof line, f))
            if (sscanf(line, "attention-server: listening on http://127.0.0.1:%d", &port) == 1)
                break;
        if (f)
            fclose(f);
        if (port > 0)
            return port;
        if (waitpid(server_pid, NULL, WNOHANG) == server_pid) {
            server_pid = 0;
            break;
        }
    }
    fprintf(stderr, "bench: %s did not start (its log: %s)\n", server, log);
    exit(1);
}

#endif
