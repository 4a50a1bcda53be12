/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * node.c -- a replica node: its durable state, open, close, promote
 *
 * The state (struct vr_state) lives in the user area of a state segment
 * mapped by the application's vista instance, and changes only inside
 * Vista transactions (vr__state_set, or backup.c's apply transactions,
 * which change the data segment and the state together).  So the state
 * is never torn, and a record's bytes are applied iff the applied seq
 * says so.
 *
 * Invariants
 *   N1. Promotion makes role PRIMARY and the new epoch durable (the Vista
 *       commit returns) before vr_promote returns, hence before the node
 *       can accept a write.
 *   N2. A node with copying set never becomes primary (VR_EINCOMPLETE).
 *   N3. A backup's redo log is applied (blog.c R1-R4) when the node
 *       opens and before a promotion makes the new epoch durable, so a
 *       promoted node holds every record it acknowledged.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "segment_layout.h"
#include "vr_int.h"

uint64_t
vr__random64(void)
{
	uint64_t x = 0;

	while (x == 0)
		if (getrandom(&x, sizeof(x), 0) != sizeof(x))
			x = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
	return x;
}

uint64_t
vr__now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

void
vr__state_seal(struct vr_state *s)
{
	s->check = rio_checksum(s, offsetof(struct vr_state, check),
		VR_STATE_SEED);
}

static int
state_ok(const struct vr_state *s)
{
	return memcmp(s->magic, VR_STATE_MAGIC, 8) == 0 &&
		s->major == VR_STATE_MAJOR &&
		s->check == rio_checksum(s, offsetof(struct vr_state, check),
			VR_STATE_SEED);
}

/* Replace the node state in one Vista transaction (durable on return). */
int
vr__state_set(vr_node *n, const struct vr_state *ns)
{
	struct vr_state tmp = *ns;
	int rc;

	vr__state_seal(&tmp);
	rc = vista_begin_transaction(n->v, 0);
	if (rc)
		return rc;
	rc = vista_set_range(n->v, n->st, sizeof(*n->st));
	if (rc) {
		(void)vista_abort_transaction(n->v);
		return rc;
	}
	memcpy(n->st, &tmp, sizeof(tmp));
	return vista_end_transaction(n->v);
}

int
vr__node_role(const vr_node *n)
{
	return (int)__atomic_load_n(&n->st->role, __ATOMIC_ACQUIRE);
}

int
vr_open(vista *v, vista_segment *seg, const struct vr_opts *o, vr_node **out)
{
	vr_node *n;
	int rc;

	if (v == NULL || seg == NULL || o == NULL || out == NULL ||
	    o->state_path == NULL)
		return vr__err(-EINVAL, "vr_open: NULL argument");
	if (o->ring_size & (o->ring_size - 1))
		return vr__err(-EINVAL,
			"vr_open: ring size %zu is not a power of two",
			o->ring_size);
	if (vista_segment_size(seg) >= VR_SEG_MAX)
		return vr__err(VR_ESIZE, "vr_open: a %zu-byte segment; a "
			"replicated one holds less than %llu bytes (the "
			"stream's pieces)", vista_segment_size(seg),
			(unsigned long long)VR_SEG_MAX);
	/* Aligned as its type asks (vr_int.h VR_LINE); its size is a
	 * multiple of that alignment, as aligned_alloc wants. */
	n = aligned_alloc(_Alignof(vr_node), sizeof(*n));
	if (n == NULL)
		return vr__err(-ENOMEM, "out of memory");
	memset(n, 0, sizeof(*n));
	n->v = v;
	n->seg = seg;
	n->base = vista_segment_base(seg);
	n->size = vista_segment_size(seg);
	n->o = *o;
	if (n->o.mode == 0)
		n->o.mode = VR_2SAFE;
	if (n->o.ring_size == 0)
		n->o.ring_size = 4u << 20;
	if (n->o.window == 0)
		n->o.window = n->o.mode == VR_1SAFE ? 16384 : 1024;
	if (n->o.heartbeat_ms == 0)
		n->o.heartbeat_ms = 10;
	if (n->o.batch_ms == 0)
		n->o.batch_ms = 1;
	if (n->o.batch_ms > n->o.heartbeat_ms) {
		/* The sender beats between batches: a longer batch would
		 * starve the backup's heartbeats. */
		int hb = (int)n->o.heartbeat_ms;
		free(n);
		return vr__err(-EINVAL, "vr_open: batch of %u ms, longer "
			"than the heartbeat (%d ms)", o->batch_ms, hb);
	}
	if (n->o.timeout_ms == 0)
		n->o.timeout_ms = 100;
	if (n->o.sender_diff && n->o.whole_ranges) {
		free(n);
		return vr__err(-EINVAL, "vr_open: sender_diff and "
			"whole_ranges together (the sender diffs, or every "
			"declared byte is sent)");
	}
	/* The caller's state_path need not outlive vr_open: the redo log's
	 * path is kept. */
	n->blog_path = malloc(strlen(o->state_path) + sizeof(".redo"));
	if (n->blog_path == NULL) {
		free(n);
		return vr__err(-ENOMEM, "out of memory");
	}
	strcpy(n->blog_path, o->state_path);
	strcat(n->blog_path, ".redo");
	n->o.state_path = NULL;
	n->efd = n->lfd = n->cfd = -1;
	pthread_mutex_init(&n->lock, NULL);
	pthread_mutex_init(&n->wlock, NULL);
	pthread_mutex_init(&n->rlock, NULL);
	n->sfd = -1;
	n->rd.fd = -1;
	pthread_cond_init(&n->room, NULL);
	pthread_cond_init(&n->ackcv, NULL);
	atomic_store(&n->alone, 1);
	rc = vista_map(v, o->state_path, o->state_addr, 4096, VISTA_CREATE,
		&n->sseg);
	if (rc)
		goto fail;
	n->st = vista_segment_base(n->sseg);
	if (memcmp(n->st->magic, "\0\0\0\0\0\0\0\0", 8) == 0) {
		struct vr_state s;
		memset(&s, 0, sizeof(s));
		memcpy(s.magic, VR_STATE_MAGIC, 8);
		s.major = VR_STATE_MAJOR;
		s.minor = VR_STATE_MINOR;
		s.role = VR_FRESH;
		s.seg_size = n->size;
		rc = vr__state_set(n, &s);
		if (rc)
			goto unmap;
	} else if (!state_ok(n->st)) {
		rc = vr__err(VR_ESTATE, "%s: not a replica node state (magic, "
			"version or check)", o->state_path);
		goto unmap;
	}
	if (n->st->seg_size != n->size) {
		rc = vr__err(VR_ESTATE, "%s: the state is of a %lu-byte "
			"segment, this one has %zu", o->state_path,
			(unsigned long)n->st->seg_size, n->size);
		goto unmap;
	}
	/* A backup that crashed: its redo log goes to the segment first
	 * (blog.c R1-R4). */
	rc = vr__blog_open(n, false);
	if (rc == 0)
		rc = vr__blog_recover(n);
	if (rc == 0)
		rc = vista_set_tx_hook(v, vr__hook, n);
	if (rc) {
		vr__blog_close(n);
		goto unmap;
	}
	*out = n;
	return 0;
unmap:
	(void)vista_unmap(n->sseg);
fail:
	pthread_mutex_destroy(&n->lock);
	pthread_mutex_destroy(&n->wlock);
	pthread_mutex_destroy(&n->rlock);
	pthread_cond_destroy(&n->room);
	pthread_cond_destroy(&n->ackcv);
	free(n->blog_path);
	free(n);
	return rc;
}

int
vr_close(vr_node *n)
{
	int rc;

	if (n == NULL)
		return 0;
	vr__primary_stop(n);
	(void)vista_set_tx_hook(n->v, NULL, NULL);
	vr__blog_close(n);
	rc = vista_unmap(n->sseg);
	pthread_mutex_destroy(&n->lock);
	pthread_mutex_destroy(&n->wlock);
	pthread_mutex_destroy(&n->rlock);
	free(n->rd.buf);
	pthread_cond_destroy(&n->room);
	pthread_cond_destroy(&n->ackcv);
	if (n->qring != n->ring)
		free(n->qring);
	free(n->ring);
	free(n->mirror);
	free(n->dout);
	free(n->dol);
	free(n->blog_path);
	free(n);
	return rc;
}

int
vr_promote(vr_node *n)
{
	struct vr_state s;
	int rc;

	if (n == NULL)
		return vr__err(-EINVAL, "vr_promote: NULL node");
	if (atomic_load(&n->following))
		return vr__err(-EBUSY, "vr_promote: vr_follow is running; "
			"stop it first");
	/* N3: the log tail is applied before the new epoch. */
	rc = vr__blog_open(n, false);
	if (rc == 0)
		rc = vr__blog_recover(n);
	if (rc)
		return rc;
	s = *n->st;
	if (s.copying)
		return vr__err(VR_EINCOMPLETE, "vr_promote: a full copy into "
			"this node was interrupted; it holds no consistent "
			"segment");
	if (s.role == VR_PRIMARY)
		return 0;
	if (s.role == VR_FRESH)
		return vr__err(VR_EINCOMPLETE, "vr_promote: this node never "
			"received a segment");
	s.role = VR_PRIMARY;
	s.epoch++;
	/* N1: durable when vr__state_set returns, before any write. */
	return vr__state_set(n, &s);
}

int
vr_status(const vr_node *n, struct vr_status *st)
{
	if (n == NULL || st == NULL)
		return vr__err(-EINVAL, "vr_status: NULL argument");
	memset(st, 0, sizeof(*st));
	st->role = (enum vr_role)n->st->role;
	st->epoch = n->st->epoch;
	memcpy(st->set_uuid, n->st->set_uuid, 16);
	if (st->role == VR_PRIMARY && n->ring != NULL) {
		pthread_mutex_lock((pthread_mutex_t *)&n->lock);
		st->stream = n->stream;
		st->seq = n->seq;
		pthread_mutex_unlock((pthread_mutex_t *)&n->lock);
	} else {
		st->stream = n->st->stream;
		/* Following: the log is ahead of the state (blog.c). */
		st->seq = atomic_load(&n->following) ?
			atomic_load(&n->bseq) : n->st->applied;
	}
	st->acked = atomic_load(&n->acked);
	st->connected = atomic_load(&n->connected);
	st->records = atomic_load(&n->records);
	st->bytes_sent = atomic_load(&n->bytes_sent);
	st->data_bytes = atomic_load(&n->data_bytes);
	st->meta_bytes = atomic_load(&n->meta_bytes);
	st->copies = atomic_load(&n->copies);
	st->announced = atomic_load(&n->announced);
	st->limit = n->st->limit;
	/* The 1-safe loss bound: the old primary returned no 1-safe commit
	 * past the limit this node granted (durably, before granting). */
#ifdef VR_BROKEN_WINDOW_ANNOUNCED
	/* wrong: the heartbeats' last announcement, which the primary's
	 * commits after it outrun */
	st->window = st->announced > st->seq ? st->announced - st->seq : 0;
#else
	st->window = st->role != VR_FRESH && !n->st->copying &&
		n->st->limit > n->st->applied ?
		n->st->limit - n->st->applied : 0;
#endif
	return 0;
}

/* The segment layout version a node speaks (HELLO). */
uint16_t vr__seg_major(void);
uint16_t
vr__seg_major(void)
{
	return VISTA_SEG_MAJOR;
}
