/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp_bad_prog.c -- what a TCP socket under dc-run --protocol buffered
 *                   refuses or reports, each with its error (keeper.c)
 *
 *   dc-run --protocol buffered --interval 20 -- dc-tcp-bad PORT
 *
 * Checks, in one run: getsockname answers the TCP address bound; a
 * second bind of a port being listened on fails with EADDRINUSE (the
 * keeper's bind, reported at the call); listen on an unbound socket fails
 * with EINVAL (the keeper binds only where it is told); connect (an
 * outgoing connection) is refused with EPERM; each failed call leaves the
 * socket usable (the listener accepts afterwards).  Prints "ok N" per
 * check and exits 0, or says which check failed and exits 1.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int fails;

static void
check(int n, int ok, const char *what)
{
	printf("%s %d %s (errno %s)\n", ok ? "ok" : "FAIL", n, what,
		strerror(errno));
	fails += !ok;
}

int
main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	int port = atoi(argv[1]);
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int l = socket(AF_INET, SOCK_STREAM, 0);
	check(1, l >= 0 && bind(l, (struct sockaddr *)&a, sizeof(a)) == 0 &&
		listen(l, 4) == 0, "bind and listen");
	struct sockaddr_in b;
	socklen_t bl = sizeof(b);
	check(2, getsockname(l, (struct sockaddr *)&b, &bl) == 0 &&
		b.sin_family == AF_INET && b.sin_port == a.sin_port,
		"getsockname answers the TCP address");
	int s = socket(AF_INET, SOCK_STREAM, 0);
	errno = 0;
	check(3, bind(s, (struct sockaddr *)&a, sizeof(a)) == -1 &&
		errno == EADDRINUSE, "a second bind: EADDRINUSE");
	int u = socket(AF_INET, SOCK_STREAM, 0);
	errno = 0;
	check(4, listen(u, 4) == -1 && errno == EINVAL,
		"listen unbound: EINVAL");
	int c = socket(AF_INET, SOCK_STREAM, 0);
	errno = 0;
	check(5, connect(c, (struct sockaddr *)&a, sizeof(a)) == -1 &&
		errno == EPERM, "connect: EPERM");
	/* the listener still works: the keeper's socket answers a client
	 * this program cannot make itself, so only its state is checked */
	int v = 0;
	socklen_t vl = sizeof(v);
	check(6, getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &v, &vl) == 0 &&
		v == 1, "the listener still listens");
	return fails ? 1 : 0;
}
