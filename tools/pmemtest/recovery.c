/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recovery.c -- crash the recovery itself (--crash-recovery N)
 *
 * Recovery runs after a power failure, and another power failure may
 * interrupt it.  For N crash images chosen uniformly among all those
 * checked (reservoir sampling, seeded), pmemtest is run again with the
 * image as the starting state and the *checker* as the traced program:
 * every crash point of the recovery yields crash images, each checked by
 * the checker again, i.e. recovered a second time.  A library checker is
 * run as the program `pmemtest check-lib LIB:FN IMAGE DIR`; a command as
 * `sh -c 'exec CMD'` (exec keeps the process the tracer follows).  The
 * nested runs print their own reports (failures saved under
 * OUT/recovery-NNNNNN) and their summaries are added up, except the
 * groups: each nested run prints its groups' keys (--group-keys; report.c
 * G1-G3, stable across runs: functions and messages, not addresses), and
 * groups of different runs that share a key are one (Y3): one recovery
 * bug met in thirty sampled images is one group, not thirty.
 *
 * Invariants
 *   Y1. The reservoir holds at most N images, each a uniform sample of the
 *       images offered so far; an image replaced is rewritten in place.
 *   Y2. Images found inconsistent themselves are not used (their recovery
 *       cannot be judged).
 */
#include <errno.h>
#include <limits.h>
#include <regex.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmemtest_int.h"

struct sample {
	uint64_t seq;
	uint32_t fence;
	char *dir;
};

struct rgroup {
	uint64_t *k;
	size_t n;
	size_t up; /* union-find parent (index) */
};

struct pmt_recovery {
	struct rgroup *g;
	size_t ng;
	struct sample *s;
	unsigned cap, n;
	uint64_t offered;
	uint64_t rng;
	char *workdir;
};

struct pmt_recovery *
pmt_recovery_new(unsigned n, uint64_t seed, const char *workdir)
{
	struct pmt_recovery *r = pmt_xcalloc(1, sizeof(*r));

	r->cap = n;
	r->s = pmt_xcalloc(n ? n : 1, sizeof(*r->s));
	r->rng = seed ^ 0x7265636f76ull;
	r->workdir = pmt_xstrdup(workdir);
	return r;
}

void
pmt_recovery_offer(struct pmt_recovery *r, struct pmt_model *m,
	const struct pmt_cp *cp, uint64_t seq, const struct pmt_lref *chosen,
	size_t n)
{
	unsigned slot;

	if (r->cap == 0)
		return;
	r->offered++;
	if (r->n < r->cap) {
		slot = r->n++;
	} else {
		uint64_t j = pmt_rand(&r->rng) % r->offered;
		if (j >= r->cap)
			return;
		slot = (unsigned)j; /* Y1 */
	}
	if (r->s[slot].dir == NULL)
		r->s[slot].dir = pmt_xasprintf("%s/rec-%u", r->workdir, slot);
	pmt_rm_rf(r->s[slot].dir);
	if (pmt_image_write(m, chosen, n, r->s[slot].dir) != 0)
		pmt_die("cannot write %s", r->s[slot].dir);
	r->s[slot].seq = seq;
	r->s[slot].fence = cp->fence;
}

static long
field(const char *s, const regmatch_t *m)
{
	return strtol(s + m->rm_so, NULL, 10);
}

/* A "pmemtest: group K..." line of a nested run. */
static void
add_group(struct pmt_recovery *r, const char *line)
{
	struct rgroup g = { NULL, 0, r->ng };
	char *end;

	for (const char *p = line;; p = end) {
		unsigned long long k = strtoull(p, &end, 16);
		if (end == p)
			break;
		g.k = pmt_xrealloc(g.k, (g.n + 1) * sizeof(*g.k));
		g.k[g.n++] = k;
	}
	r->g = pmt_xrealloc(r->g, (r->ng + 1) * sizeof(*r->g));
	r->g[r->ng++] = g;
}

static size_t
root(struct pmt_recovery *r, size_t i)
{
	while (r->g[i].up != i)
		i = r->g[i].up = r->g[r->g[i].up].up;
	return i;
}

/* Y3 */
static uint64_t
merged_groups(struct pmt_recovery *r)
{
	uint64_t n = 0;

	for (size_t a = 0; a < r->ng; a++)
		for (size_t b = a + 1; b < r->ng; b++) {
			bool meet = false;
			for (size_t x = 0; x < r->g[a].n && !meet; x++)
				for (size_t y = 0; y < r->g[b].n && !meet; y++)
					meet = r->g[a].k[x] == r->g[b].k[y];
			if (meet)
				r->g[root(r, b)].up = root(r, a);
		}
	for (size_t a = 0; a < r->ng; a++)
		n += root(r, a) == a;
	return n;
}

/* Run one nested pmemtest; add its summary to t. */
static int
nested(struct pmt_recovery *r, char **argv, FILE *out,
	struct pmt_recovery_totals *t)
{
	int fd[2], st;
	pid_t pid;
	char *text = NULL;
	size_t len = 0;
	FILE *f;
	regex_t re;
	regmatch_t mm[4];

	if (pipe(fd) != 0)
		pmt_die("pipe: %m");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		pmt_die("fork: %m");
	if (pid == 0) {
		close(fd[0]);
		dup2(fd[1], STDOUT_FILENO);
		dup2(fd[1], STDERR_FILENO);
		execv(argv[0], argv);
		_exit(127);
	}
	close(fd[1]);
	f = fdopen(fd[0], "r");
	if (f == NULL || getdelim(&text, &len, '\0', f) < 0) {
		free(text);
		text = pmt_xstrdup("");
	}
	if (f != NULL)
		fclose(f);
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			pmt_die("waitpid: %m");
	for (char *l = text, *e; l && *l; l = e ? e + 1 : NULL) {
		e = strchr(l, '\n');
		if (strncmp(l, "pmemtest: group ", 16) == 0) {
			if (e)
				*e = '\0';
			add_group(r, l + 16);
			if (e)
				*e = '\n';
			continue;
		}
		fprintf(out, "  | %.*s\n", (int)(e ? e - l : (long)strlen(l)), l);
	}
	if (regcomp(&re, "images: ([0-9]+) checked, ([0-9]+) inconsistent, "
		    "([0-9]+) unique", REG_EXTENDED) == 0) {
		if (regexec(&re, text, 4, mm, 0) == 0) {
			t->checked += (uint64_t)field(text, &mm[1]);
			t->inconsistent += (uint64_t)field(text, &mm[2]);
			t->reported += (uint64_t)field(text, &mm[3]);
		}
		regfree(&re);
	}
	free(text);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

int
pmt_recovery_run(struct pmt_recovery *r, struct pmt_model *m,
	const struct pmt_recovery_args *a, FILE *out,
	struct pmt_recovery_totals *t)
{
	char self[PATH_MAX];
	ssize_t k = readlink("/proc/self/exe", self, sizeof(self) - 1);
	int worst = 0;

	if (k <= 0)
		pmt_die("cannot find pmemtest itself: %m");
	self[k] = '\0';
	for (unsigned i = 0; i < r->n; i++) {
		struct sample *s = &r->s[i];
		char *argv[64], *image, *prog = NULL, *sub = NULL;
		char num[4][32];
		int ac = 0, rc;

		if (a->failed(s->seq, a->arg))
			continue; /* Y2 */
		t->images++;
		image = pmt_xasprintf("%s/%s", s->dir,
			m->pools[a->image_pool].name);
		snprintf(num[0], sizeof(num[0]), "%llu",
			(unsigned long long)a->seed);
		snprintf(num[1], sizeof(num[1]), "%u", a->k);
		snprintf(num[2], sizeof(num[2]), "%u", a->jobs);
		snprintf(num[3], sizeof(num[3]), "%u", a->timeout_s);
		sub = pmt_xasprintf("%s/recovery-%06llu", a->outdir,
			(unsigned long long)s->seq);
		argv[ac++] = self;
		argv[ac++] = "run";
		argv[ac++] = "--seed";
		argv[ac++] = num[0];
		argv[ac++] = "--k";
		argv[ac++] = num[1];
		argv[ac++] = "--jobs";
		argv[ac++] = num[2];
		argv[ac++] = "--timeout";
		argv[ac++] = num[3];
		argv[ac++] = "--out";
		argv[ac++] = sub;
		argv[ac++] = "--max-failures";
		argv[ac++] = "10";
		argv[ac++] = "--no-lints";
		argv[ac++] = "--group-keys";
		if (a->tear)
			argv[ac++] = "--tear";
		char *pools[32];
		unsigned np = 0;
		for (unsigned p = 0; p < m->npools && np < 16; p++) {
			if (!m->pools[p].present)
				continue;
			pools[np] = pmt_xasprintf("%s/%s", s->dir,
				m->pools[p].name);
			argv[ac++] = "--pool";
			argv[ac++] = pools[np++];
		}
		if (a->check_lib != NULL) {
			argv[ac++] = "--check-lib";
			argv[ac++] = (char *)a->check_lib;
			argv[ac++] = "--";
			argv[ac++] = self;
			argv[ac++] = "check-lib";
			argv[ac++] = (char *)a->check_lib;
			argv[ac++] = image;
			argv[ac++] = s->dir;
		} else {
			char *cmd = pmt_expand_cmd(a->check_cmd, image, s->dir);
			prog = pmt_xasprintf("exec %s", cmd);
			free(cmd);
			argv[ac++] = "--check";
			argv[ac++] = (char *)a->check_cmd;
			argv[ac++] = "--";
			argv[ac++] = "/bin/sh";
			argv[ac++] = "-c";
			argv[ac++] = prog;
		}
		argv[ac] = NULL;
		fprintf(out, "\ncrash during recovery: image #%llu (fence #%u), "
			"its recovery traced and crashed at every fence:\n",
			(unsigned long long)s->seq, s->fence);
		rc = nested(r, argv, out, t);
		if (rc > worst)
			worst = rc;
		for (unsigned p = 0; p < np; p++)
			free(pools[p]);
		free(image);
		free(prog);
		free(sub);
	}
	t->unique = merged_groups(r);
	return worst;
}

void
pmt_recovery_free(struct pmt_recovery *r)
{
	if (r == NULL)
		return;
	for (unsigned i = 0; i < r->cap; i++)
		free(r->s[i].dir);
	for (size_t i = 0; i < r->ng; i++)
		free(r->g[i].k);
	free(r->g);
	free(r->s);
	free(r->workdir);
	free(r);
}
