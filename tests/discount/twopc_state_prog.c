/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * twopc_state_prog.c -- writes a 2PC participant's state record of a given
 *                       format version (twopc_layout.h), for the test
 *                       that a record of another format is refused
 *
 *   dc-2pc-state DIR VERSION
 *
 * DIR/2pc-state gets one valid record in slot 1 (seq 1): IDLE, round 0,
 * committed 0, with VERSION in its version field and a right checksum;
 * slot 0 stays zero.  Exit 0, or 1 with a message.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rio.h"
#include "twopc_layout.h"

int
main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: dc-2pc-state DIR VERSION\n");
		return 2;
	}
	struct dc_2pc_state s[2];
	memset(s, 0, sizeof(s));
	s[1].magic = DC_2PC_STATE_MAGIC;
	s[1].version = (uint16_t)atoi(argv[2]);
	s[1].state = DC_2PC_IDLE;
	s[1].seq = 1;
	s[1].checksum = rio_checksum(&s[1], 56, DC_2PC_SEED);
	char p[4096];
	snprintf(p, sizeof(p), "%s/2pc-state", argv[1]);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0 || write(fd, s, sizeof(s)) != (ssize_t)sizeof(s) ||
	    close(fd) != 0) {
		perror(p);
		return 1;
	}
	return 0;
}
