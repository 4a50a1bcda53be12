/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lm_probe.c -- a hostile client of examples/lockmgr_server
 *
 *   lm_probe PORT
 *
 * Sends the lock server requests it must refuse without dying: empty, too
 * short, longer than a lock message (9 and 64 bytes: the endpoint's
 * largest), an unknown operation, a lock out of range -- and a datagram
 * that is not Vistagrams at all.  Every request must get an LM_ERROR
 * reply within a bounded wait.  Exits 0 if so, 1 otherwise.  A volatile
 * endpoint: the probe needs no persistence.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vistagrams.h>

#include "../../examples/lockmgr.h"

#define NPROBES 6

int
main(int argc, char **argv)
{
	struct vg_endpoint_opts o = { 0 };
	struct sockaddr_in to = { 0 };
	unsigned char big[LM_MAX_MESSAGE];
	struct lm_msg bad_op = { 99, 0 }, bad_lock = { LM_ACQUIRE, 1000 };
	const struct {
		const void *p;
		size_t len;
	} probes[NPROBES] = {
		{ NULL, 0 }, { big, 4 }, { big, 9 }, { big, sizeof(big) },
		{ &bad_op, sizeof(bad_op) }, { &bad_lock, sizeof(bad_lock) },
	};
	vg_endpoint *ep;
	int rc, errors = 0, got = 0;

	if (argc != 2) {
		fprintf(stderr, "usage: %s PORT\n", argv[0]);
		return 2;
	}
	memset(big, 0x11, sizeof(big));
	to.sin_family = AF_INET;
	to.sin_port = htons((uint16_t)atoi(argv[1]));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	o.node_id = 99;
	o.max_message = LM_MAX_MESSAGE;
	o.rto_us = 5000;
	o.rto_max_us = 100000;
	if ((rc = vg_endpoint_open(NULL, NULL, &o, &ep)) != 0) {
		fprintf(stderr, "lm_probe: open: %s\n", vg_errormsg());
		return 1;
	}

	/* Not a Vistagrams datagram: the library drops it. */
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0 || sendto(fd, "garbage", 7, 0, (struct sockaddr *)&to,
			      sizeof(to)) != 7) {
		perror("lm_probe: sendto");
		return 1;
	}
	close(fd);

	for (int i = 0; i < NPROBES; i++) {
		rc = vista_send_request(ep, (struct sockaddr *)&to, sizeof(to),
			probes[i].p, probes[i].len, NULL);
		if (rc) {
			fprintf(stderr, "lm_probe: send %d: %s\n", i,
				vg_errormsg());
			return 1;
		}
	}
	/* At most 100 waits of 100 ms. */
	for (int tries = 0; got < NPROBES && tries < 100; tries++) {
		struct lm_msg r;
		uint64_t seq = 0;
		size_t len;
		rc = vista_receive_response(ep, &seq, &r, sizeof(r), &len, 100);
		if (rc == -ETIMEDOUT)
			continue;
		if (rc) {
			fprintf(stderr, "lm_probe: receive: %s\n",
				vg_errormsg());
			return 1;
		}
		got++;
		if (len != sizeof(r) || r.op != LM_ERROR) {
			fprintf(stderr, "lm_probe: request %llu: reply %u, "
				"not LM_ERROR\n", (unsigned long long)seq,
				len == sizeof(r) ? r.op : 0);
			errors++;
		}
	}
	vg_poll(ep, 50); /* the last acknowledgements */
	vg_endpoint_close(ep);
	printf("lm_probe: %d of %d refusals, %d wrong\n", got, NPROBES,
		errors);
	return got == NPROBES && errors == 0 ? 0 : 1;
}
