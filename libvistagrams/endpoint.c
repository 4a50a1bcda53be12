/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * endpoint.c -- open (create, validate, recover), close, address, stats
 *
 * Opening an endpoint over a segment:
 *   1. geometry: capacities (options, or the stored ones) -> offsets;
 *   2. an all-zero superblock means "no tables": with VG_CREATE they are
 *      made -- the area zeroed raw and drained, then the superblock and
 *      the counter written in one Vista transaction, so a crash leaves
 *      either no tables or complete empty ones (E1);
 *   3. otherwise the superblock is validated (magic, checksum, version,
 *      features, reserved bytes, node id, geometry, size) before anything
 *      is written (E2), then every slot of every table and the committed
 *      op log (E3);
 *   4. sockets are bound; the volatile state is rebuilt from the tables
 *      (destinations, outstanding requests due for retransmission now,
 *      counts); the committed op log is replayed (E4).
 *
 * Invariants
 *   E1. Tables exist iff the superblock's magic is set; the superblock is
 *       only ever written inside a transaction, after the zeroed area is
 *       durable.
 *   E2. A failing open changes nothing in the segment (validation reads
 *       only), except that recovery of valid tables may have run.
 *   E3. Corruption found at open (a checksum, a state, a stale op record)
 *       fails the open with VG_ECORRUPT and the first violation.
 *   E4. Replay at open is the same idempotent code as at commit.
 *   E5. One endpoint per tables area in a process (a registry refuses a
 *       second open with -EBUSY); libvista refuses a second process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rio_int.h"
#include "vg_int.h"

#define DEF_REQUESTS 64u
#define DEF_RESPONSES 256u
#define DEF_CLIENTS 256u
#define DEF_MESSAGE 8192u
#define DEF_OPS 64u
#define DEF_RX_BUFFERS 256u
#define DEF_RTO_US 10000u
#define DEF_RTO_MAX_US 1000000u
#define DEF_ACK_DELAY_US 20000u
#define DEF_HORIZON_MS VG_HORIZON_DEFAULT_MS
#define MAX_ENTRIES (1u << 20)
#define MAX_OPS 4096u
#define MIN_CAP 8u

/* ---- registry of open areas (E5) ---- */

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct reg {
	struct reg *next;
	const void *area;
} *reg_head;

static int
reg_add(const void *area)
{
	struct reg *r;

	pthread_mutex_lock(&reg_lock);
	for (r = reg_head; r; r = r->next)
		if (r->area == area)
			break;
	if (r == NULL && (r = malloc(sizeof(*r))) != NULL) {
		r->area = area;
		r->next = reg_head;
		reg_head = r;
		pthread_mutex_unlock(&reg_lock);
		return 0;
	}
	pthread_mutex_unlock(&reg_lock);
	return r ? vg__err(-EBUSY, "the segment's tables are open in another "
			       "endpoint of this process")
		 : vg__err(-ENOMEM, "endpoint registry");
}

static void
reg_remove(const void *area)
{
	pthread_mutex_lock(&reg_lock);
	for (struct reg **pp = &reg_head; *pp; pp = &(*pp)->next) {
		if ((*pp)->area == area) {
			struct reg *r = *pp;
			*pp = r->next;
			free(r);
			break;
		}
	}
	pthread_mutex_unlock(&reg_lock);
}

/* ---- geometry ---- */

static uint32_t
pow2_at_least(uint64_t x)
{
	uint32_t p = MIN_CAP;

	while (p < x)
		p <<= 1;
	return p;
}

static uint64_t
align_up(uint64_t x)
{
	return (x + VG_TBL_ALIGN - 1) & ~(uint64_t)(VG_TBL_ALIGN - 1);
}

/* Offsets and size from the capacities in sb. */
static void
geometry_offsets(struct vg_super *sb)
{
	uint64_t off = align_up(sizeof(struct vg_super));

	sb->buf_stride = align_up(sb->max_message);
	sb->txhdr_off = off;
	off += sizeof(struct vg_txhdr);
	sb->ops_off = off = align_up(off);
	off += 2 * (uint64_t)sb->max_ops * sizeof(struct vg_op);
	sb->req_off = off = align_up(off);
	off += (uint64_t)sb->req_cap * sizeof(struct vg_req_slot);
	sb->req_buf_off = off = align_up(off);
	off += (uint64_t)sb->req_cap * sb->buf_stride;
	sb->resp_off = off = align_up(off);
	off += (uint64_t)sb->resp_cap * sizeof(struct vg_resp_slot);
	sb->resp_buf_off = off = align_up(off);
	off += (uint64_t)sb->resp_cap * sb->buf_stride;
	sb->peer_off = off = align_up(off);
	off += (uint64_t)sb->peer_cap * sizeof(struct vg_peer_slot);
	sb->area_size = align_up(off);
}

static void
geometry(struct vg_super *sb, const struct vg_endpoint_opts *o)
{
	sb->req_limit = o->max_requests;
	sb->req_cap = pow2_at_least(2ull * o->max_requests);
	sb->resp_limit = o->max_responses;
	sb->resp_cap = pow2_at_least(2ull * o->max_responses);
	sb->peer_limit = o->max_clients;
	sb->peer_cap = pow2_at_least(2ull * o->max_clients);
	sb->max_message = o->max_message;
	sb->max_ops = o->max_ops;
	geometry_offsets(sb);
}

static bool
prob_ok(double p)
{
	return p >= 0 && p <= 1;
}

static int
fill_defaults(const struct vg_endpoint_opts *in, struct vg_endpoint_opts *o)
{
	*o = *in;
#define DEF(f, d) \
	if (o->f == 0) \
		o->f = (d)
	DEF(max_requests, DEF_REQUESTS);
	DEF(max_responses, DEF_RESPONSES);
	DEF(max_clients, DEF_CLIENTS);
	DEF(max_message, DEF_MESSAGE);
	DEF(max_ops, DEF_OPS);
	DEF(rx_buffers, DEF_RX_BUFFERS);
	DEF(rto_us, DEF_RTO_US);
	DEF(rto_max_us, DEF_RTO_MAX_US);
	DEF(ack_delay_us, DEF_ACK_DELAY_US);
	DEF(horizon_ms, DEF_HORIZON_MS);
#undef DEF
	if (o->host == NULL)
		o->host = "127.0.0.1";
	if (o->max_requests > MAX_ENTRIES || o->max_responses > MAX_ENTRIES ||
	    o->max_clients > MAX_ENTRIES)
		return vg__err(-EINVAL, "a table of more than %u entries",
			MAX_ENTRIES);
	if (o->max_message > VG_WIRE_MAX_MESSAGE)
		return vg__err(-EINVAL, "max_message %u: a datagram carries at "
			"most %u bytes", o->max_message, VG_WIRE_MAX_MESSAGE);
	if (o->max_ops > MAX_OPS)
		return vg__err(-EINVAL, "max_ops %u is above %u", o->max_ops,
			MAX_OPS);
	if (o->rx_buffers > MAX_ENTRIES)
		return vg__err(-EINVAL, "rx_buffers %u is above %u",
			o->rx_buffers, MAX_ENTRIES);
	if (o->rto_max_us < o->rto_us)
		return vg__err(-EINVAL, "rto_max_us %u is below rto_us %u",
			o->rto_max_us, o->rto_us);
	if (!prob_ok(o->faults.drop) || !prob_ok(o->faults.duplicate) ||
	    !prob_ok(o->faults.reorder) || !prob_ok(o->faults.delay))
		return vg__err(-EINVAL, "fault probabilities must lie in "
			"[0, 1]");
	return 0;
}

int
vg_table_size(const struct vg_endpoint_opts *opts, size_t *size)
{
	struct vg_endpoint_opts o;
	struct vg_super sb;
	int rc;

	if (opts == NULL || size == NULL)
		return vg__err(-EINVAL, "vg_table_size: missing argument");
	if ((rc = fill_defaults(opts, &o)) != 0)
		return rc;
	memset(&sb, 0, sizeof(sb));
	geometry(&sb, &o);
	*size = sb.area_size;
	return 0;
}

/* ---- the superblock ---- */

static uint64_t
super_csum(const struct vg_super *sb)
{
	return rio_checksum(sb, offsetof(struct vg_super, checksum),
		VG_TBL_SUPER_SEED);
}

static void
super_init(struct vg_super *sb, const struct vg_endpoint_opts *o)
{
	struct timespec ts;

	memset(sb, 0, sizeof(*sb));
	memcpy(sb->magic, VG_TBL_MAGIC, sizeof(VG_TBL_MAGIC));
	sb->major = VG_TBL_MAJOR;
	sb->minor = VG_TBL_MINOR;
	sb->super_size = sizeof(*sb);
	sb->incompat = VG_TBL_FEAT_INCOMPAT_EXPIRED;
	sb->node_id = o->node_id;
	clock_gettime(CLOCK_REALTIME, &ts);
	sb->incarnation = (uint64_t)ts.tv_sec * 1000000000ull +
		(uint64_t)ts.tv_nsec;
	geometry(sb, o);
	sb->checksum = super_csum(sb);
}

/* The superblock's identity and versioning (librio/hdr.c, H1..H8).
 * Tables are always written (no read-only open): an unknown ro_compat
 * feature refuses them. */
static const struct rio__hdr_rule super_rule = {
	.what = "Vistagrams tables",
	.magic = VG_TBL_MAGIC,
	.magic_len = sizeof(VG_TBL_MAGIC),
	.major = VG_TBL_MAJOR,
	.minor = VG_TBL_MINOR,
	.fields = RIO__HDR_INCOMPAT | RIO__HDR_RO_COMPAT | RIO__HDR_COMPAT,
	.incompat_known = VG_TBL_FEAT_INCOMPAT_KNOWN,
	.ro_compat_known = VG_TBL_FEAT_RO_COMPAT_KNOWN,
	.compat_known = 0,
	.code = {
		[RIO__HDR_BADMAGIC] = VG_EBADMAGIC,
		[RIO__HDR_BADCSUM] = VG_ECORRUPT,
		[RIO__HDR_VERSION] = VG_EVERSION,
		[RIO__HDR_FEATURE] = VG_EFEATURE,
		[RIO__HDR_RESERVED] = VG_ECORRUPT,
	},
};

/* E2: reads only. */
static int
validate_super(const struct vg_super *sb, uint64_t node, size_t seg_size)
{
	struct vg_super g;
	struct rio__hdr_view v = {
		.magic = sb->magic,
		.csum_ok = sb->checksum == super_csum(sb),
		.major = sb->major,
		.minor = sb->minor,
		.incompat = sb->incompat,
		.ro_compat = sb->ro_compat,
		.compat = sb->compat,
		.reserved = { { sb->reserved, sizeof(sb->reserved) } },
	};
	char why[160];
	int rc = rio__hdr_check(&super_rule, &v, RIO__HDR_WRITE, why,
		sizeof(why));

	if (rc)
		return vg__err(rc, "%s", why);
	/* Then this format's own fields. */
	if (sb->super_size != sizeof(*sb) || sb->flags != 0)
		return vg__err(VG_ECORRUPT, "superblock has invalid fields");
	if (sb->node_id != node)
		return vg__err(VG_ENODE, "tables belong to node %llu, not %llu",
			(unsigned long long)sb->node_id,
			(unsigned long long)node);
	memset(&g, 0, sizeof(g));
	g.req_cap = sb->req_cap;
	g.resp_cap = sb->resp_cap;
	g.peer_cap = sb->peer_cap;
	g.max_message = sb->max_message;
	g.max_ops = sb->max_ops;
	geometry_offsets(&g);
	if (sb->max_message == 0 || sb->max_message > VG_WIRE_MAX_MESSAGE ||
	    sb->max_ops == 0 || sb->max_ops > MAX_OPS ||
	    sb->req_limit == 0 || sb->req_cap < 2ull * sb->req_limit ||
	    (sb->req_cap & (sb->req_cap - 1)) ||
	    sb->resp_limit == 0 || sb->resp_cap < 2ull * sb->resp_limit ||
	    (sb->resp_cap & (sb->resp_cap - 1)) ||
	    sb->peer_limit == 0 || sb->peer_cap < 2ull * sb->peer_limit ||
	    (sb->peer_cap & (sb->peer_cap - 1)) ||
	    sb->req_cap > 2 * MAX_ENTRIES || sb->resp_cap > 2 * MAX_ENTRIES ||
	    sb->peer_cap > 2 * MAX_ENTRIES || sb->incarnation == 0 ||
	    memcmp(&g.buf_stride, &sb->buf_stride,
		    offsetof(struct vg_super, reserved) -
			    offsetof(struct vg_super, buf_stride)) != 0)
		return vg__err(VG_ECORRUPT, "superblock geometry is "
			"inconsistent");
	if (sb->area_size > seg_size)
		return vg__err(VG_ESMALL, "tables need %llu bytes, the segment "
			"has %zu", (unsigned long long)sb->area_size,
			seg_size);
	return 0;
}

static void
map_area(vg_endpoint *ep, uint8_t *area)
{
	struct vg_super *sb = (struct vg_super *)(void *)area;

	ep->area = area;
	ep->sb = sb;
	ep->txh = (struct vg_txhdr *)(void *)(area + sb->txhdr_off);
	ep->ops = (struct vg_op *)(void *)(area + sb->ops_off);
	ep->req = (struct vg_req_slot *)(void *)(area + sb->req_off);
	ep->req_buf = area + sb->req_buf_off;
	ep->resp = (struct vg_resp_slot *)(void *)(area + sb->resp_off);
	ep->resp_buf = area + sb->resp_buf_off;
	ep->peer = (struct vg_peer_slot *)(void *)(area + sb->peer_off);
	ep->req_mask = sb->req_cap - 1;
	ep->resp_mask = sb->resp_cap - 1;
	ep->peer_mask = sb->peer_cap - 1;
	ep->max_message = sb->max_message;
	ep->max_ops = sb->max_ops;
	ep->buf_stride = sb->buf_stride;
	ep->node = sb->node_id;
	ep->inc = sb->incarnation;
}

/* E1 */
static int
create_tables(vg_endpoint *ep, uint8_t *base, size_t size,
	const struct vg_endpoint_opts *o)
{
	struct vg_super sb;
	int rc;

	super_init(&sb, o);
	if (sb.area_size > size)
		return vg__err(VG_ESMALL, "tables need %llu bytes, the segment "
			"has %zu (vg_table_size)",
			(unsigned long long)sb.area_size, size);
	/* S9 (server.c): the area may hold bytes the thread's last
	 * transaction declared; it is ended for good before they are
	 * stored over raw.  Costs a load when there is nothing to settle. */
	(void)vg__settle(ep);
	vg__raw_begin(ep, base, sb.area_size);
	memset(base + sizeof(sb), 0, sb.area_size - sizeof(sb));
	vg__raw_end(ep, base, sb.area_size);
	vg__flush(ep, base, sb.area_size);
	/* The empty tables must be durable before the superblock that
	 * declares them valid. */
	vg__drain(ep);

	struct vg_txhdr *txh = (struct vg_txhdr *)(void *)(base + sb.txhdr_off);
	struct vista_range r[2] = {
		{ base, sizeof(sb) },
		{ txh, sizeof(*txh) },
	};
	if ((rc = vista_begin_transaction(ep->v, 0)) != 0)
		return rc;
	if ((rc = vista_set_ranges(ep->v, 2, r)) != 0) {
		(void)vista_abort_transaction(ep->v);
		return rc;
	}
	memcpy(base, &sb, sizeof(sb));
	txh->next_seq = 1;
	return vista_end_transaction(ep->v);
}

/* ---- volatile state ---- */

static int
alloc_volatile(vg_endpoint *ep, const struct vg_endpoint_opts *o)
{
	size_t data = sizeof(struct vg_wire_hdr) + 8 * VG_WIRE_MAX_ACKS +
		ep->max_message;

	ep->pkt_size = align_up(sizeof(struct vg__pkt) + data);
	ep->reqv = calloc((size_t)ep->req_mask + 1, sizeof(*ep->reqv));
	ep->resp_pending = calloc((size_t)ep->resp_mask + 1, 1);
	ep->resp_since = calloc((size_t)ep->resp_mask + 1,
		sizeof(*ep->resp_since));
	ep->resp_window = calloc((size_t)ep->resp_mask + 1,
		sizeof(*ep->resp_window));
	ep->peer_heard = calloc((size_t)ep->peer_mask + 1,
		sizeof(*ep->peer_heard));
	ep->pkt_mem = calloc(o->rx_buffers, ep->pkt_size);
	ep->scratch = malloc(data);
	if (!ep->reqv || !ep->resp_pending || !ep->resp_since ||
	    !ep->resp_window || !ep->peer_heard || !ep->pkt_mem || !ep->scratch)
		return vg__err(-ENOMEM, "endpoint state (%u receive buffers of "
			"%zu bytes)", o->rx_buffers, ep->pkt_size);
	for (uint32_t i = o->rx_buffers; i-- > 0;)
		vg__pkt_free(ep, (struct vg__pkt *)(void *)
			((uint8_t *)ep->pkt_mem + (size_t)i * ep->pkt_size));
	return 0;
}

static void
free_endpoint(vg_endpoint *ep)
{
	vg__net_close(ep);
	if (ep->area && !vg__volatile(ep))
		reg_remove(ep->area);
	free(ep->reqv);
	free(ep->resp_pending);
	free(ep->resp_since);
	free(ep->resp_window);
	free(ep->peer_heard);
	free(ep->pkt_mem);
	free(ep->scratch);
	free(ep->dests);
	free(ep->tx.undo);
	free(ep->vol_area);
	free(ep);
}

/* E3, E4 */
static int
recover(vg_endpoint *ep)
{
	const struct vg_txhdr *t = ep->txh;
	int rc;

	if (t->next_seq == 0 || t->reserved0 != 0 ||
	    !rio__all_zero(t->reserved, sizeof(t->reserved)))
		return vg__err(VG_ECORRUPT, "transaction header has invalid "
			"fields");
	if ((rc = vg__tables_check(ep)) != 0)
		return rc;
	if (t->committed_gen &&
	    (rc = vg__op_check(ep, t->committed_gen, t->nops)) != 0)
		return rc;
	if ((rc = vg__client_recover(ep)) != 0 ||
	    (rc = vg__server_recover(ep)) != 0)
		return rc;
	if (t->committed_gen)
		vg__op_replay(ep, t->committed_gen, t->nops, true);
	return vg__check(ep);
}

int
vg_endpoint_open(vista *v, vista_segment *seg,
	const struct vg_endpoint_opts *opts, vg_endpoint **out)
{
	struct vg_endpoint_opts o;
	vg_endpoint *ep;
	int rc;

	if (opts == NULL || out == NULL)
		return vg__err(-EINVAL, "vg_endpoint_open: missing argument");
	if ((v == NULL) != (seg == NULL))
		return vg__err(-EINVAL, "vg_endpoint_open: give both a vista "
			"instance and a segment, or neither (volatile)");
	if (opts->node_id == 0)
		return vg__err(-EINVAL, "vg_endpoint_open: node id 0");
	if ((rc = fill_defaults(opts, &o)) != 0)
		return rc;
	if ((ep = calloc(1, sizeof(*ep))) == NULL)
		return vg__err(-ENOMEM, "endpoint");
	ep->net.fd = ep->net.rfd = -1;
	ep->v = v;
	ep->seg = seg;
	ep->rto_us = o.rto_us;
	ep->rto_max_us = o.rto_max_us;
	ep->ack_delay_us = o.ack_delay_us;
	ep->horizon_ns = o.horizon_ms == VG_HORIZON_NEVER ? UINT64_MAX
		: (uint64_t)o.horizon_ms * 1000000ull;
	ep->inbox_max = o.rx_buffers / 2 ? o.rx_buffers / 2 : 1;

	if (v == NULL) {
		struct vg_super sb;
		super_init(&sb, &o);
		ep->vol_area = aligned_alloc(VG_TBL_ALIGN, sb.area_size);
		if (ep->vol_area == NULL) {
			rc = vg__err(-ENOMEM, "volatile tables of %llu bytes",
				(unsigned long long)sb.area_size);
			goto fail;
		}
		memset(ep->vol_area, 0, sb.area_size);
		memcpy(ep->vol_area, &sb, sizeof(sb));
		map_area(ep, ep->vol_area);
		ep->txh->next_seq = 1;
	} else {
		uint8_t *base = vista_segment_base(seg);
		size_t size = vista_segment_size(seg);
		ep->pool = vista_segment_pool(seg);
		ep->protect = rio_pool_protected(ep->pool);
		if (size < sizeof(struct vg_super)) {
			rc = vg__err(VG_ESMALL, "segment of %zu bytes", size);
			goto fail;
		}
		if ((rc = reg_add(base)) != 0) {
			free(ep);
			return rc;
		}
		ep->area = base;
		if (rio__all_zero(base, sizeof(struct vg_super))) {
			if (!(o.flags & VG_CREATE)) {
				rc = vg__err(VG_ENOTABLES, "the segment holds no "
					"tables (open with VG_CREATE to make "
					"them)");
				goto fail;
			}
			if ((rc = create_tables(ep, base, size, &o)) != 0)
				goto fail;
		}
		rc = validate_super((struct vg_super *)(void *)base,
			o.node_id, size);
		if (rc)
			goto fail;
		map_area(ep, base);
	}
	if ((rc = alloc_volatile(ep, &o)) != 0)
		goto fail;
	if ((rc = vg__net_open(ep, o.host, o.port)) != 0)
		goto fail;
	struct vg_faults *f = &o.faults;
	if (f->drop > 0 || f->duplicate > 0 || f->reorder > 0 ||
	    f->delay > 0) {
		ep->net.faulty = true;
		ep->net.f = *f;
		ep->net.rng = f->seed ? f->seed : 1;
	}
	if ((rc = recover(ep)) != 0)
		goto fail;
	*out = ep;
	return 0;
fail:
	free_endpoint(ep);
	return rc;
}

int
vg_endpoint_close(vg_endpoint *ep)
{
	if (ep == NULL)
		return 0;
	if (ep->tx.joined)
		return vg__err(VG_EINTX, "endpoint %llu is part of an open "
			"transaction", (unsigned long long)ep->node);
	if (!ep->error) {
		vg__client_flush_acks(ep);
		vg__server_forget_doomed(ep);
	}
	for (uint32_t i = 0; i <= ep->req_mask; i++)
		ep->reqv[i].resp = NULL; /* buffers are freed with pkt_mem */
	free_endpoint(ep);
	return 0;
}

int
vg_endpoint_address(const vg_endpoint *ep, struct sockaddr_storage *addr,
	socklen_t *len)
{
	if (ep == NULL || addr == NULL || len == NULL)
		return vg__err(-EINVAL, "vg_endpoint_address: missing argument");
	*addr = ep->net.self;
	*len = ep->net.selflen;
	return 0;
}

int
vg_endpoint_error(const vg_endpoint *ep)
{
	if (ep == NULL)
		return vg__err(-EINVAL, "vg_endpoint_error: no endpoint");
	return vg__check(ep);
}

int
vg_stats(const vg_endpoint *ep, struct vg_stats *out)
{
	if (ep == NULL || out == NULL)
		return vg__err(-EINVAL, "vg_stats: missing argument");
	*out = ep->st;
	return 0;
}
