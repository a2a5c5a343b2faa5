/*
 * The sandbox ("pause") process of a pod on the dev cluster's kubelet node: it holds the pod's
 * namespaces and does nothing else. It blocks in pause(), reaps any child handed to it
 * (it is PID 1 of the pod's PID namespace when the pod shares one) and exits 0 on SIGINT or
 * SIGTERM. Built by kube_nudge_dev.image.pause_image with `gcc -static -Os` into a FROM
 * scratch image.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int signum)
{
    (void)signum;
    _exit(0);
}

static void on_child(int signum)
{
    int saved = errno;
    (void)signum;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    errno = saved;
}

static int handle(int signum, void (*handler)(int))
{
    struct sigaction action;

    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    return sigaction(signum, &action, NULL);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "-v") == 0) {
        puts("kube-nudge-pause");
        return 0;
    }
    if (getpid() != 1) {
        fputs("kube-nudge-pause: warning: not PID 1; children of other processes are not "
              "reaped here\n", stderr);
    }
    if (handle(SIGINT, on_stop) < 0 || handle(SIGTERM, on_stop) < 0
        || handle(SIGCHLD, on_child) < 0) {
        perror("kube-nudge-pause: sigaction");
        return 1;
    }
    for (;;) {
        pause();
    }
}
