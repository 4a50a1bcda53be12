/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * game_prog.c -- an xpilot-like real-time game over UDP: a server and its
 *                clients (the thesis' Figure 6.7 application, written for
 *                the benchmark and the game kill test)
 *
 *   dc-game server PORT FRAMES [FPS [LINGER_MS]]
 *   dc-game client ID PORT [INPUT_HZ [QUIET_S [LINGER_MS]]]
 *   dc-game check ID FILE     (what client ID drew: check() below)
 *
 * Unmodified in the thesis' sense: no libdc call; run it under dc-run.
 *
 * The server, on 127.0.0.1:PORT, runs FRAMES frames at FPS (15) frames a
 * second.  Between two frames it reads the clients' inputs (datagrams
 * "thrust dx, dy, sequence number seq", the newest per client kept);
 * at each frame it applies each client's newest input, if newer than
 * the one its ship last took, moves the NSHIP ships (integer physics:
 * thrust, drag, a wrapping world) and sends the frame -- its number, each
 * ship's position, velocity and the input it took -- to every client
 * heard from.  A frame late by more than a frame period (the server was
 * stopped, or restarted) does not make it catch up: the next frame is
 * due a period from now.  After frame FRAMES it sends a last frame
 * marked over, three times, and exits 0 -- LINGER_MS (0) later.
 *
 * A client (ID < NSHIP) sends an input INPUT_HZ (30) times a second,
 * thrust a fixed function of (ID, seq), and draws each frame it receives:
 * one line on standard output (a visible event), its own ship as the
 * frame has it (position, velocity, the input taken and its thrust).  It checks what the
 * server's frames say, the clients' view of "the game goes on":
 *   1. frame numbers never go back; a frame received again is identical
 *      (a recovered server sends a frame again: a duplicate);
 *   2. frame f + 1 is frame f moved by the physics with the inputs f + 1
 *      says it took, each either a newer input of that ship (its thrust
 *      the function of its sequence number) or none (thrust 0, sequence
 *      number unchanged);
 * and ends at the frame marked over, printing on standard error
 *   client ID: frames N dups D gaps G back B bad X fps F
 * (F: distinct frames per second between the first and the last).  Exit
 * 0 when the game ended with no frame going back and none bad; 3 when
 * one did; 4 when no frame came for QUIET_S (20) seconds; 2 usage.
 * It exits LINGER_MS (0) after that line, reading and dropping frames.
 *
 * LINGER_MS: under CPV-2PC and CBNDV-2PC the four processes are one
 * computation, and a round needs every participant; one that has exited
 * makes the others' rounds abort (dc-coord knows no participant that
 * leaves).  With a linger longer than the spread of the processes' ends,
 * every process's last visible event commits before any of them exits.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define NSHIP 3
#define WORLD (1 << 20)
#define IN_MAGIC 0x47494e31u  /* "GIN1" */
#define FR_MAGIC 0x47465231u  /* "GFR1" */

struct input {
	uint32_t magic, id, seq;
	int32_t dx, dy;
};

struct ship {
	int32_t x, y, vx, vy;
	uint32_t seq;         /* input taken last */
	int32_t dx, dy;       /* thrust taken at this frame (0: none) */
	uint32_t pad;
};

struct frame {
	uint32_t magic, num, over, pad;
	struct ship s[NSHIP];
};

static double
now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* the thrust of ship id's input number seq */
static void
thrust(uint32_t id, uint32_t seq, int32_t *dx, int32_t *dy)
{
	uint32_t h = (seq * 2654435761u) ^ (id * 40503u);
	*dx = (int32_t)(h % 9) - 4;
	*dy = (int32_t)((h >> 8) % 9) - 4;
}

static int32_t
wrap(int32_t v)
{
	return ((v % WORLD) + WORLD) % WORLD;
}

/* one frame of one ship that took thrust (dx, dy) */
static void
move(struct ship *s, int32_t dx, int32_t dy)
{
	s->vx += dx * 8;
	s->vy += dy * 8;
	s->vx -= s->vx / 16;
	s->vy -= s->vy / 16;
	s->x = wrap(s->x + s->vx);
	s->y = wrap(s->y + s->vy);
	s->dx = dx;
	s->dy = dy;
}

static int
udp_socket(int port)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	if (fd < 0) {
		perror("socket");
		exit(1);
	}
	if (port > 0) {
		struct sockaddr_in a = { .sin_family = AF_INET,
			.sin_port = htons(port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			perror("bind");
			exit(1);
		}
	}
	return fd;
}

/* the server's whole state: in memory, checkpointed by dc-run */
static struct frame g;
static struct sockaddr_in peer[NSHIP];
static int known[NSHIP];
static struct input latest[NSHIP];

/* LINGER_MS of reading and dropping datagrams, with no visible event */
static void
linger(int fd, int ms)
{
	double end = now_s() + ms / 1000.0;
	char buf[512];
	for (double t = now_s(); t < end; t = now_s()) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)((end - t) * 1000) + 1) > 0)
			(void)recv(fd, buf, sizeof(buf), 0);
	}
}

static int
server(int port, uint32_t frames, int fps, int linger_ms)
{
	int fd = udp_socket(port);
	double period = 1.0 / fps, due = now_s() + period;
	g.magic = FR_MAGIC;
	for (int i = 0; i < NSHIP; i++) {
		g.s[i].x = (i + 1) * (WORLD / (NSHIP + 1));
		g.s[i].y = WORLD / 2;
	}
	while (g.num < frames) {
		/* the inputs until the frame is due */
		for (;;) {
			double t = now_s();
			if (t >= due)
				break;
			struct pollfd p = { .fd = fd, .events = POLLIN };
			int ms = (int)((due - t) * 1000) + 1;
			if (poll(&p, 1, ms) <= 0)
				continue;
			struct input in;
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(fd, &in, sizeof(in), 0,
				(struct sockaddr *)&from, &fl);
			if (n != (ssize_t)sizeof(in) || in.magic != IN_MAGIC ||
			    in.id >= NSHIP)
				continue;
			peer[in.id] = from;
			known[in.id] = 1;
			if (in.seq > latest[in.id].seq)
				latest[in.id] = in;
		}
		double t = now_s();
		due = t > due + period ? t + period : due + period;
		g.num++;
		for (int i = 0; i < NSHIP; i++) {
			struct ship *s = &g.s[i];
			if (latest[i].seq > s->seq) {
				s->seq = latest[i].seq;
				move(s, latest[i].dx, latest[i].dy);
			} else {
				move(s, 0, 0);
			}
		}
		g.over = g.num >= frames;
		for (int k = 0; k < (g.over ? 3 : 1); k++) {
			for (int i = 0; i < NSHIP; i++)
				if (known[i])
					sendto(fd, &g, sizeof(g), 0,
						(struct sockaddr *)&peer[i],
						sizeof(peer[i]));
			if (g.over)
				usleep(50000);
		}
	}
	linger(fd, linger_ms);
	return 0;
}

/* is ship i of the next frame, n, ship i of this one, a, moved by the
 * input n says it took? */
static const char *
follows_ship(uint32_t i, const struct ship *a, const struct ship *n)
{
	struct ship s = *a;
	int32_t dx = 0, dy = 0;
	if (n->seq < s.seq)
		return "a ship's input went back";
	if (n->seq > s.seq)
		thrust(i, n->seq, &dx, &dy);
	if (n->dx != dx || n->dy != dy)
		return "a thrust that is not the input's";
	move(&s, dx, dy);
	s.seq = n->seq;
	if (memcmp(&s, n, sizeof(s)) != 0)
		return "a ship not where the physics puts it";
	return NULL;
}

/* is b frame a moved by the inputs b says it took? */
static const char *
follows(const struct frame *a, const struct frame *b)
{
	for (uint32_t i = 0; i < NSHIP; i++) {
		const char *why = follows_ship(i, &a->s[i], &b->s[i]);
		if (why)
			return why;
	}
	return NULL;
}

static int
client(uint32_t id, int port, int hz, int quiet_s, int linger_ms)
{
	int fd = udp_socket(0);
	struct sockaddr_in srv = { .sin_family = AF_INET,
		.sin_port = htons(port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct frame last = { 0 };
	long frames = 0, dups = 0, gaps = 0, back = 0, bad = 0;
	uint32_t seq = 0;
	double t_first = 0, t_last = 0, heard = now_s();
	double next_in = now_s(), period = 1.0 / hz;
	int over = 0;
	while (!over) {
		double t = now_s();
		if (t - heard > quiet_s) {
			fprintf(stderr, "client %u: no frame for %d s after "
				"frame %u\n", id, quiet_s, last.num);
			return 4;
		}
		if (t >= next_in) {
			struct input in = { IN_MAGIC, id, ++seq, 0, 0 };
			thrust(id, seq, &in.dx, &in.dy);
			sendto(fd, &in, sizeof(in), 0, (struct sockaddr *)&srv,
				sizeof(srv));
			next_in += period;
			if (next_in < t)
				next_in = t + period;
			continue;
		}
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, (int)((next_in - t) * 1000) + 1) <= 0)
			continue;
		struct frame f;
		if (recv(fd, &f, sizeof(f), 0) != (ssize_t)sizeof(f) ||
		    f.magic != FR_MAGIC)
			continue;
		heard = now_s();
		const char *why = NULL;
		if (frames > 0 && f.num < last.num) {
			back++;
			why = "a frame went back";
		} else if (frames > 0 && f.num == last.num) {
			dups++;
			if (memcmp(&f, &last, sizeof(f)) != 0)
				why = "a frame received again is not the same";
		} else {
			if (frames > 0 && f.num == last.num + 1)
				why = follows(&last, &f);
			else if (frames > 0)
				gaps++;
			frames++;
			t_last = heard;
			if (frames == 1)
				t_first = heard;
		}
		if (why) {
			bad += f.num >= last.num;
			fprintf(stderr, "client %u: frame %u after %u: %s\n",
				id, f.num, last.num, why);
		}
		if (f.num >= last.num || frames == 1)
			last = f;
		over = f.over;
		/* the client's screen: its ship as the frame has it */
		const struct ship *m = &f.s[id];
		printf("frame %u ship %u at %d,%d v %d,%d in %u %d,%d\n",
			f.num, id, m->x, m->y, m->vx, m->vy, m->seq, m->dx,
			m->dy);
		fflush(stdout);
	}
	double fps = frames > 1 ? (frames - 1) / (t_last - t_first) : 0;
	fprintf(stderr, "client %u: frames %ld dups %ld gaps %ld back %ld "
		"bad %ld fps %.2f\n", id, frames, dups, gaps, back, bad, fps);
	linger(fd, linger_ms);
	return back || bad ? 3 : 0;
}

/*
 * dc-game check ID FILE: what client ID drew (its standard output, every
 * incarnation's, in order), checked as the client checks the frames it
 * receives, but from outside the computation: a client that a 2PC
 * protocol rolled back checks again from its checkpoint, the screen keeps
 * everything.  Visible output is never taken back, so the screen must be
 * one game: a frame number never goes back; a frame drawn again (a
 * recovered client redraws the frame it was about to draw) is the same
 * line; frame f + 1's ship is frame f's moved by the physics with the
 * input f + 1 says it took.  Exit 0 and a summary; 3 and the first
 * violation; 2 for a line that is not a frame of ship ID.
 */
static int
check(uint32_t id, const char *path)
{
	FILE *in = fopen(path, "r");
	if (in == NULL) {
		perror(path);
		return 2;
	}
	char line[256], prev[256] = "";
	struct ship last = { 0 };
	uint32_t lastnum = 0;
	long n = 0, dups = 0, gaps = 0;
	int rc = 0;
	while (rc == 0 && fgets(line, sizeof(line), in)) {
		struct ship s = { 0 };
		uint32_t num, who;
		if (sscanf(line, "frame %u ship %u at %d,%d v %d,%d in %u %d,%d",
			    &num, &who, &s.x, &s.y, &s.vx, &s.vy, &s.seq, &s.dx,
			    &s.dy) != 9 || who != id) {
			fprintf(stderr, "check %u: line %ld is not a frame of "
				"ship %u: %s", id, n + 1, id, line);
			rc = 2;
			break;
		}
		const char *why = NULL;
		if (n > 0 && num < lastnum)
			why = "a frame drawn after a later one";
		else if (n > 0 && num == lastnum && strcmp(line, prev) != 0)
			why = "a frame drawn again, not the same";
		else if (n > 0 && num == lastnum + 1)
			why = follows_ship(id, &last, &s);
		if (why) {
			fprintf(stderr, "check %u: line %ld, frame %u after "
				"%u: %s\n", id, n + 1, num, lastnum, why);
			rc = 3;
		}
		dups += n > 0 && num == lastnum;
		gaps += n > 0 && num > lastnum + 1;
		n++;
		lastnum = num;
		last = s;
		snprintf(prev, sizeof(prev), "%s", line);
	}
	fclose(in);
	if (rc == 0)
		printf("check %u: %ld lines, last frame %u, %ld drawn again, "
			"%ld gaps\n", id, n, lastnum, dups, gaps);
	return rc;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "check") == 0)
		return check((uint32_t)atoi(argv[2]), argv[3]);
	if (argc >= 4 && strcmp(argv[1], "server") == 0) {
		int fps = argc > 4 ? atoi(argv[4]) : 15;
		int ms = argc > 5 ? atoi(argv[5]) : 0;
		if (fps <= 0 || ms < 0)
			return 2;
		return server(atoi(argv[2]), (uint32_t)atol(argv[3]), fps, ms);
	}
	if (argc >= 4 && strcmp(argv[1], "client") == 0) {
		uint32_t id = (uint32_t)atoi(argv[2]);
		int hz = argc > 4 ? atoi(argv[4]) : 30;
		int quiet = argc > 5 ? atoi(argv[5]) : 20;
		int ms = argc > 6 ? atoi(argv[6]) : 0;
		if (id >= NSHIP || hz <= 0 || quiet <= 0 || ms < 0)
			return 2;
		return client(id, atoi(argv[3]), hz, quiet, ms);
	}
	fprintf(stderr, "usage: dc-game server PORT FRAMES [FPS [LINGER_MS]]\n"
		"       dc-game client ID PORT [INPUT_HZ [QUIET_S "
		"[LINGER_MS]]]\n"
		"       dc-game check ID FILE\n");
	return 2;
}
