/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wl_order_entry.c -- order-entry, the thesis' TPC-C variant
 *
 * Tables (TPC-C clause 1.3, records padded to fixed sizes): warehouse,
 * district, customer, item, stock, order (with its order-lines inside),
 * new-order, history.  The cardinalities are TPC-C's scaled by one factor
 * so the tables fill the database: per warehouse 10 districts, C customers
 * per district, I items (= stock rows per warehouse); orders and
 * new-orders of a district live in rings of R = 2C slots, history in a
 * 2 MiB ring.  A ring of k slots holds its newest k - 1 rows: the slot
 * after them is free, and the next insert writes its row there (a range
 * declared fresh, read by nobody unless that transaction commits: the
 * order it replaces was delivered, since a new-order that would reach an
 * undelivered one delivers first).  Population follows clause 4.3.3 (C orders per district,
 * the newest 30% undelivered).
 *
 * Transactions, serial, no terminal I/O: new-order (45), payment (43),
 * delivery (5).  TPC-C sets minimum shares (payment >= 43%, delivery >= 4%,
 * new-order the rest); with delivery at 4 the undelivered queue grows
 * without bound, which a database of fixed size cannot hold, so delivery
 * runs at 5 and the queue drains (on average: a new-order that finds its
 * district's ring full runs the warehouse's delivery instead).  1% of
 * new-orders name an unused item
 * and roll back (clause 2.4.2.3), through the backend's abort ("none" has
 * no abort, so there those 1% commit normally).  Payment
 * picks the customer by number (the by-name lookup of clause 2.5.1.2 is
 * not implemented); bad-credit customers get c_data rewritten.  Each
 * transaction declares all its ranges together, up front.
 *
 * Consistency conditions checked after every run (clause 3.3.2.x):
 *   1   W_YTD = sum(D_YTD)
 *   2   D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)
 *   3   the new-order rows of a district are consecutive order numbers
 *   4,6 O_OL_CNT = the order's order-lines (the rest of the slot is zero)
 *   5   O_CARRIER_ID unset iff the order has a new-order row
 *   7   OL_DELIVERY_D unset iff O_CARRIER_ID unset
 *   8,9 W_YTD and D_YTD = initial + committed payments (driver's totals)
 *   12  sum(C_BALANCE + C_YTD_PAYMENT) = initial + delivered amounts
 * and, against the driver's running totals: sum(S_YTD), sum(S_ORDER_CNT),
 * sum(C_PAYMENT_CNT), sum(C_DELIVERY_CNT), the history ring's amounts.
 * After a crash (oe_recovered, no driver's totals): conditions 1-7, which
 * the database alone decides.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpcbench.h"

#define OE_MAGIC 0x6f652d6372647265ull
#define DISTRICTS 10
#define MAX_LINES 15
#define MIX_NEW 45
#define MIX_PAY 43
#define MIX_DEL 5

struct oe_hdr {
	uint64_t magic;
	uint64_t hist_head;
	uint64_t clock; /* "date": +1 per committed transaction */
	uint8_t pad[40];
};
struct oe_warehouse {
	int64_t ytd;
	int32_t tax;
	char name[10], street[40], city[20], state[2], zip[10];
	char pad[2];
};
struct oe_district {
	int64_t ytd;
	int32_t tax;
	uint32_t next_o_id;
	uint32_t no_head, no_tail; /* new-order rows: ring indexes */
	char name[10], street[40], city[20];
	char pad[2];
};
struct oe_customer {
	int64_t balance;
	int64_t ytd_payment;
	uint32_t payment_cnt, delivery_cnt;
	int32_t discount;
	char credit[2];
	char pad[2];
	char first[16], last[16];
	char data[504];
};
struct oe_item {
	int64_t price;
	uint32_t im_id;
	char name[24];
	char data[52];
};
struct oe_stock {
	int32_t quantity;
	uint32_t order_cnt, remote_cnt, pad;
	int64_t ytd;
	char dist[DISTRICTS][24];
	char data[50];
	char pad2[6];
};
struct oe_line {
	uint32_t i_id; /* item + 1; 0 = no line */
	uint32_t supply_w_id;
	uint32_t quantity, pad;
	int64_t amount;
	uint64_t delivery_d;
	char dist_info[24];
};
struct oe_order {
	uint32_t o_id, c_id;
	uint64_t entry_d;
	uint32_t carrier_id, ol_cnt, all_local, pad;
	struct oe_line lines[MAX_LINES];
};
struct oe_hist {
	uint32_t c_id, c_d_id, c_w_id, d_id, w_id, pad;
	int64_t amount;
	uint64_t date;
	char data[24];
};
_Static_assert(sizeof(struct oe_hdr) == 64, "hdr");
_Static_assert(sizeof(struct oe_warehouse) == 96, "warehouse");
_Static_assert(sizeof(struct oe_district) == 96, "district");
_Static_assert(sizeof(struct oe_customer) == 568, "customer");
_Static_assert(sizeof(struct oe_item) == 88, "item");
_Static_assert(sizeof(struct oe_stock) == 320, "stock");
_Static_assert(sizeof(struct oe_line) == 56, "line");
_Static_assert(sizeof(struct oe_order) == 872, "order");
_Static_assert(sizeof(struct oe_hist) == 64, "history");

struct oe {
	uint32_t W, C, I, R;
	uint64_t hist_cap;
	size_t off_w, off_d, off_c, off_i, off_s, off_o, off_no, off_h;
	uint64_t rng;
	/* the driver's running totals (committed transactions only) */
	int64_t *w_ytd, *d_ytd;     /* W, W*10 */
	int64_t init_cust, delivered;
	uint64_t init_pay_cnt, payments, deliveries;
	int64_t stock_ytd;
	uint64_t stock_cnt;
	uint64_t new_orders, rollbacks;
	int64_t *ring;              /* the last hist_cap - 1 amounts */
	int64_t ring_sum;
	uint64_t hist_n;
	size_t blk;                 /* tb_opts.block */
	struct tb_rows rows;        /* tb_order_entry_rows */
};

/* Row I of the table at OFF of rows of SIZE bytes.  Packed (blk 0), or
 * (blk, the disk layout) so that no row straddles a block of blk bytes:
 * blk / size rows a block, the rest of the block unused.  Through
 * w->rows when the database is not all in memory (tb_order_entry_rows),
 * else in db.  Inlined: the packed layout in memory costs what the plain
 * arithmetic did. */
static inline __attribute__((always_inline)) void *
row(const struct oe *w, void *db, size_t off, size_t size, size_t i)
{
	if (__builtin_expect(!w->blk && !w->rows.at, 1))
		return (char *)db + off + i * size;
	size_t at = off + i * size;
	if (w->blk) {
		size_t per = w->blk / size;
		at = off + i / per * w->blk + i % per * size;
	}
	if (w->rows.at)
		return w->rows.at(w->rows.arg, at, size);
	return (char *)db + at;
}

/* The table bytes of N rows of SIZE bytes, in the layout of row(). */
static size_t
table(const struct oe *w, size_t n, size_t size)
{
	if (!w->blk)
		return n * size;
	size_t per = w->blk / size;
	return (n + per - 1) / per * w->blk;
}

/* The end of the transaction (or of one row's use): its rows may go. */
static void
rows_done(const struct oe *w)
{
	if (w->rows.done)
		w->rows.done(w->rows.arg);
}

static struct oe_hdr *
hdr(const struct oe *w, void *db)
{
	return row(w, db, 0, sizeof(struct oe_hdr), 0);
}
static struct oe_warehouse *
wh(const struct oe *w, void *db, uint32_t i)
{
	return row(w, db, w->off_w, sizeof(struct oe_warehouse), i);
}
static struct oe_district *
dist(const struct oe *w, void *db, uint32_t wi, uint32_t d)
{
	return row(w, db, w->off_d, sizeof(struct oe_district),
		(size_t)wi * DISTRICTS + d);
}
static struct oe_customer *
cust(const struct oe *w, void *db, uint32_t wi, uint32_t d, uint32_t c)
{
	return row(w, db, w->off_c, sizeof(struct oe_customer),
		((size_t)wi * DISTRICTS + d) * w->C + c);
}
static struct oe_item *
item(const struct oe *w, void *db, uint32_t i)
{
	return row(w, db, w->off_i, sizeof(struct oe_item), i);
}
static struct oe_stock *
stock(const struct oe *w, void *db, uint32_t wi, uint32_t i)
{
	return row(w, db, w->off_s, sizeof(struct oe_stock),
		(size_t)wi * w->I + i);
}
static struct oe_order *
order(const struct oe *w, void *db, uint32_t wi, uint32_t d, uint32_t o_id)
{
	return row(w, db, w->off_o, sizeof(struct oe_order),
		((size_t)wi * DISTRICTS + d) * w->R + o_id % w->R);
}
static uint32_t *
no_row(const struct oe *w, void *db, uint32_t wi, uint32_t d, uint32_t k)
{
	return row(w, db, w->off_no, sizeof(uint32_t),
		((size_t)wi * DISTRICTS + d) * w->R + k % w->R);
}
static struct oe_hist *
hist(const struct oe *w, void *db, uint64_t k)
{
	return row(w, db, w->off_h, sizeof(struct oe_hist), k % w->hist_cap);
}

/* Bytes the tables take for W warehouses at scale (C, I, R). */
static size_t
layout(struct oe *w, size_t hist)
{
	size_t nd = (size_t)w->W * DISTRICTS;
	/* each table starts on a block in the disk layout */
	size_t b = w->blk ? w->blk : 1;
#define NEXT(off, n) ((off) + ((n) + b - 1) / b * b)
	w->off_w = NEXT(0, sizeof(struct oe_hdr));
	w->off_d = NEXT(w->off_w, table(w, w->W, sizeof(struct oe_warehouse)));
	w->off_c = NEXT(w->off_d, table(w, nd, sizeof(struct oe_district)));
	w->off_i = NEXT(w->off_c, table(w, nd * w->C,
		sizeof(struct oe_customer)));
	w->off_s = NEXT(w->off_i, table(w, w->I, sizeof(struct oe_item)));
	w->off_o = NEXT(w->off_s, table(w, (size_t)w->W * w->I,
		sizeof(struct oe_stock)));
	w->off_no = NEXT(w->off_o, table(w, nd * w->R,
		sizeof(struct oe_order)));
	w->off_h = NEXT(w->off_no, (table(w, nd * w->R, sizeof(uint32_t)) +
		63) & ~(size_t)63);
	return NEXT(w->off_h, hist);
#undef NEXT
}

static void
scale(struct oe *w, double f)
{
	w->C = (uint32_t)(3000 * f);
	w->I = (uint32_t)(100000 * f);
	if (w->C < 30)
		w->C = 30;
	if (w->I < 200)
		w->I = 200;
	w->R = 2 * w->C;
}

static int
oe_init(const struct tb_opts *o, size_t size, uint64_t seed, void **out)
{
	struct oe *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -1;
	w->blk = o ? o->block : 0; /* NULL: packed (ckr-tpcc) */
	if (w->blk && w->blk < sizeof(struct oe_order)) {
		tb_err("order-entry: %zu-byte blocks hold no order", w->blk);
		free(w);
		return -1;
	}
	size_t hist = size / 16 < (2u << 20) ? size / 16 : 2u << 20;
	hist = hist / sizeof(struct oe_hist) * sizeof(struct oe_hist);
	w->hist_cap = hist / sizeof(struct oe_hist);
	/* Full TPC-C scale per warehouse when it fits, else one warehouse
	 * at the largest scale that fits. */
	w->W = 1;
	scale(w, 1.0);
	size_t one = layout(w, hist);
	if (one <= size) {
		w->W = (uint32_t)(size / one);
		while (w->W > 1 && layout(w, hist) > size)
			w->W--;
	} else {
		double lo = 0, hi = 1;
		for (int i = 0; i < 40; i++) {
			double mid = (lo + hi) / 2;
			scale(w, mid);
			if (layout(w, hist) <= size)
				lo = mid;
			else
				hi = mid;
		}
		scale(w, lo);
	}
	if (layout(w, hist) > size || w->hist_cap < 2) {
		tb_err("order-entry: a %zu-byte database is too small", size);
		free(w);
		return -1;
	}
	w->rng = seed;
	w->w_ytd = calloc(w->W, sizeof(*w->w_ytd));
	w->d_ytd = calloc((size_t)w->W * DISTRICTS, sizeof(*w->d_ytd));
	w->ring = calloc(w->hist_cap - 1, sizeof(*w->ring));
	if (!w->w_ytd || !w->d_ytd || !w->ring) {
		free(w->w_ytd);
		free(w->d_ytd);
		free(w->ring);
		free(w);
		return -1;
	}
	*out = w;
	return 0;
}

static void
fill(uint64_t *rng, char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (char)('a' + tb_below(rng, 26));
}

/* The sums the running totals start from, over a freshly populated
 * database. */
static void
tally(struct oe *w, void *db)
{
	for (uint32_t wi = 0; wi < w->W; wi++) {
		w->w_ytd[wi] = wh(w, db, wi)->ytd;
		for (uint32_t d = 0; d < DISTRICTS; d++) {
			w->d_ytd[wi * DISTRICTS + d] = dist(w, db, wi, d)->ytd;
			for (uint32_t c = 0; c < w->C; c++) {
				const struct oe_customer *z = cust(w, db, wi, d, c);
				w->init_cust += z->balance + z->ytd_payment;
				w->init_pay_cnt += z->payment_cnt;
				rows_done(w);
			}
		}
	}
}

void
tb_order_entry_rows(void *wl, const struct tb_rows *r)
{
	struct oe *w = wl;
	w->rows = r ? *r : (struct tb_rows){ 0 };
}

void
tb_order_entry_adopt(void *wl, void *db)
{
	tally(wl, db);
}

static void
oe_populate(void *wl, void *db)
{
	struct oe *w = wl;
	uint64_t *rng = &w->rng;
	struct oe_hdr *h = hdr(w, db);
	h->magic = OE_MAGIC;
	h->clock = 1;
	for (uint32_t i = 0; i < w->I; i++) {
		struct oe_item *it = item(w, db, i);
		it->price = 100 + (int64_t)tb_below(rng, 9901);
		it->im_id = 1 + (uint32_t)tb_below(rng, 10000);
		fill(rng, it->name, sizeof(it->name));
		fill(rng, it->data, sizeof(it->data));
	}
	uint32_t delivered = w->C * 7 / 10;
	for (uint32_t wi = 0; wi < w->W; wi++) {
		struct oe_warehouse *x = wh(w, db, wi);
		x->ytd = 30000000; /* 300,000.00 */
		x->tax = (int32_t)tb_below(rng, 2001);
		fill(rng, x->name, sizeof(x->name));
		for (uint32_t i = 0; i < w->I; i++) {
			struct oe_stock *s = stock(w, db, wi, i);
			s->quantity = 10 + (int32_t)tb_below(rng, 91);
			fill(rng, s->dist[0], sizeof(s->dist));
			fill(rng, s->data, sizeof(s->data));
		}
		for (uint32_t d = 0; d < DISTRICTS; d++) {
			struct oe_district *y = dist(w, db, wi, d);
			y->ytd = 3000000; /* 30,000.00 */
			y->tax = (int32_t)tb_below(rng, 2001);
			y->next_o_id = w->C + 1;
			fill(rng, y->name, sizeof(y->name));
			for (uint32_t c = 0; c < w->C; c++) {
				struct oe_customer *z = cust(w, db, wi, d, c);
				z->balance = -1000; /* -10.00 */
				z->ytd_payment = 1000;
				z->payment_cnt = 1;
				z->discount = (int32_t)tb_below(rng, 5001);
				memcpy(z->credit, tb_below(rng, 10) ? "GC" : "BC", 2);
				fill(rng, z->first, sizeof(z->first));
				fill(rng, z->last, sizeof(z->last));
				fill(rng, z->data, 500);
			}
			for (uint32_t o_id = 1; o_id <= w->C; o_id++) {
				struct oe_order *or = order(w, db, wi, d, o_id);
				or->o_id = o_id;
				or->c_id = o_id - 1;
				or->entry_d = 1;
				or->ol_cnt = 5 + (uint32_t)tb_below(rng, 11);
				or->all_local = 1;
				bool done = o_id <= delivered;
				or->carrier_id = done ? 1 + (uint32_t)tb_below(rng, 10) : 0;
				for (uint32_t l = 0; l < or->ol_cnt; l++) {
					struct oe_line *ln = &or->lines[l];
					ln->i_id = 1 + (uint32_t)tb_below(rng, w->I);
					ln->supply_w_id = wi;
					ln->quantity = 5;
					ln->amount = done ? 0 :
						1 + (int64_t)tb_below(rng, 999999);
					ln->delivery_d = done ? 1 : 0;
					fill(rng, ln->dist_info, sizeof(ln->dist_info));
				}
				if (!done)
					*no_row(w, db, wi, d, y->no_tail++) = o_id;
			}
		}
	}
	tally(w, db);
}

static uint32_t
other_warehouse(struct oe *w, uint32_t wi)
{
	if (w->W == 1)
		return wi;
	uint32_t x = (uint32_t)tb_below(&w->rng, w->W - 1);
	return x >= wi ? x + 1 : x;
}

static int delivery_wh(struct oe *w, void *db, const struct tb_backend *b,
	void *ctx, uint32_t wi);

/* TPC-C 2.4: new-order.  Returns like tb_workload.tx. */
static int
new_order(struct oe *w, void *db, const struct tb_backend *b, void *ctx)
{
	uint64_t *rng = &w->rng;
	struct oe_hdr *h = hdr(w, db);
	uint32_t wi = (uint32_t)tb_below(rng, w->W);
	uint32_t d = (uint32_t)tb_below(rng, DISTRICTS);
	uint32_t c = (uint32_t)tb_below(rng, w->C);
	uint32_t cnt = 5 + (uint32_t)tb_below(rng, 11);
	bool rollback = tb_below(rng, 100) == 0 && b->can_abort;
	uint32_t items[MAX_LINES], supply[MAX_LINES], qty[MAX_LINES];
	uint32_t all_local = 1;
	for (uint32_t l = 0; l < cnt; l++) {
		items[l] = (uint32_t)tb_below(rng, w->I);
		supply[l] = tb_below(rng, 100) == 0 ? other_warehouse(w, wi) : wi;
		all_local &= supply[l] == wi;
		qty[l] = 1 + (uint32_t)tb_below(rng, 10);
	}
	if (rollback)
		items[cnt - 1] = w->I; /* unused item number */

	struct oe_district *dd = dist(w, db, wi, d);
	uint32_t o_id = dd->next_o_id;
	/* The district's ring holds R orders; its undelivered ones are a
	 * random walk that drifts down (delivery 5 against new-order 4.5
	 * per district) but reaches any bound in a long enough run on a
	 * small database.  Full: the warehouse's delivery runs instead. */
	if (dd->no_tail != dd->no_head &&
	    o_id - *no_row(w, db, wi, d, dd->no_head) >= w->R)
		return delivery_wh(w, db, b, ctx, wi);
	struct oe_order *or = order(w, db, wi, d, o_id);
	uint32_t *no = no_row(w, db, wi, d, dd->no_tail);
	struct tb_range r[4 + MAX_LINES];
	size_t n = 0;
	r[n++] = (struct tb_range){ dd, 24 }; /* ytd..no_tail */
	/* Inserted: the order and its lines, the new-order row, each in its
	 * ring's free slot (read by nobody unless this commits). */
	r[n++] = (struct tb_range){ or, sizeof(*or), true };
	r[n++] = (struct tb_range){ no, sizeof(*no), true };
	r[n++] = (struct tb_range){ &h->clock, sizeof(h->clock) };
	for (uint32_t l = 0; l < cnt; l++)
		if (items[l] < w->I)
			r[n++] = (struct tb_range){
				stock(w, db, supply[l], items[l]), 24 };
	if (b->begin(ctx) || b->set_ranges(ctx, n, r))
		return -1;
	const struct oe_customer *cu = cust(w, db, wi, d, c);
	int64_t total = 0;
	(void)cu->discount; /* read for the total, as TPC-C does */
	dd->next_o_id++;
	*no = o_id;
	dd->no_tail++;
	memset(or, 0, sizeof(*or));
	or->o_id = o_id;
	or->c_id = c;
	or->entry_d = h->clock++;
	or->ol_cnt = cnt;
	or->all_local = all_local;
	int64_t ytd = 0;
	uint32_t remote = 0;
	for (uint32_t l = 0; l < cnt; l++) {
		if (items[l] >= w->I) {
			/* "Item number is not valid": roll back. */
			if (b->abort(ctx))
				return -1;
			w->rollbacks++;
			return 1;
		}
		const struct oe_item *it = item(w, db, items[l]);
		struct oe_stock *s = stock(w, db, supply[l], items[l]);
		if (s->quantity >= (int32_t)qty[l] + 10)
			s->quantity -= (int32_t)qty[l];
		else
			s->quantity += 91 - (int32_t)qty[l];
		s->ytd += qty[l];
		s->order_cnt++;
		if (supply[l] != wi) {
			s->remote_cnt++;
			remote++;
		}
		struct oe_line *ln = &or->lines[l];
		ln->i_id = items[l] + 1;
		ln->supply_w_id = supply[l];
		ln->quantity = qty[l];
		ln->amount = (int64_t)qty[l] * it->price;
		memcpy(ln->dist_info, s->dist[d], sizeof(ln->dist_info));
		total += ln->amount;
		ytd += qty[l];
	}
	if (b->commit(ctx))
		return -1;
	w->stock_ytd += ytd;
	w->stock_cnt += cnt;
	w->new_orders++;
	(void)total;
	(void)remote;
	return 0;
}

/* TPC-C 2.5: payment (customer by number). */
static int
payment(struct oe *w, void *db, const struct tb_backend *b, void *ctx)
{
	uint64_t *rng = &w->rng;
	struct oe_hdr *h = hdr(w, db);
	uint32_t wi = (uint32_t)tb_below(rng, w->W);
	uint32_t d = (uint32_t)tb_below(rng, DISTRICTS);
	uint32_t cw = wi, cd = d;
	if (tb_below(rng, 100) >= 85 && w->W > 1) {
		cw = other_warehouse(w, wi);
		cd = (uint32_t)tb_below(rng, DISTRICTS);
	}
	uint32_t c = (uint32_t)tb_below(rng, w->C);
	int64_t amount = 100 + (int64_t)tb_below(rng, 499901);
	struct oe_warehouse *x = wh(w, db, wi);
	struct oe_district *y = dist(w, db, wi, d);
	struct oe_customer *z = cust(w, db, cw, cd, c);
	struct oe_hist *hr = hist(w, db, h->hist_head);
	bool bc = memcmp(z->credit, "BC", 2) == 0;
	struct tb_range r[6] = {
		{ &x->ytd, sizeof(x->ytd) },
		{ &y->ytd, sizeof(y->ytd) },
		{ z, 24 }, /* balance, ytd_payment, counts */
		{ hr, sizeof(*hr), true }, /* inserted: the free slot */
		{ h, 24 }, /* hist_head, clock */
		{ z->data, 500 },
	};
	if (b->begin(ctx) || b->set_ranges(ctx, bc ? 6 : 5, r))
		return -1;
	x->ytd += amount;
	y->ytd += amount;
	z->balance -= amount;
	z->ytd_payment += amount;
	z->payment_cnt++;
	if (bc) {
		char note[64];
		int k = snprintf(note, sizeof(note), "%u %u %u %u %u %lld|", c,
			cd, cw, d, wi, (long long)amount);
		memmove(z->data + k, z->data, 500 - (size_t)k);
		memcpy(z->data, note, (size_t)k);
	}
	*hr = (struct oe_hist){ .c_id = c, .c_d_id = cd, .c_w_id = cw,
		.d_id = d, .w_id = wi, .amount = amount, .date = h->clock };
	memcpy(hr->data, x->name, 10);
	memcpy(hr->data + 12, y->name, 10);
	h->hist_head++;
	h->clock++;
	if (b->commit(ctx))
		return -1;
	w->w_ytd[wi] += amount;
	w->d_ytd[wi * DISTRICTS + d] += amount;
	w->payments++;
	size_t slot = w->hist_n % (w->hist_cap - 1);
	w->ring_sum += amount - w->ring[slot];
	w->ring[slot] = amount;
	w->hist_n++;
	return 0;
}

/* TPC-C 2.7: delivery of the oldest new order of each district of
 * warehouse WI. */
static int
delivery_wh(struct oe *w, void *db, const struct tb_backend *b, void *ctx,
	uint32_t wi)
{
	uint64_t *rng = &w->rng;
	struct oe_hdr *h = hdr(w, db);
	uint32_t carrier = 1 + (uint32_t)tb_below(rng, 10);
	struct tb_range r[1 + 3 * DISTRICTS];
	struct oe_order *ords[DISTRICTS] = { 0 };
	size_t n = 0;
	r[n++] = (struct tb_range){ &h->clock, sizeof(h->clock) };
	for (uint32_t d = 0; d < DISTRICTS; d++) {
		struct oe_district *y = dist(w, db, wi, d);
		if (y->no_head == y->no_tail)
			continue; /* clause 2.7.4.2: skipped */
		uint32_t o_id = *no_row(w, db, wi, d, y->no_head);
		ords[d] = order(w, db, wi, d, o_id);
		r[n++] = (struct tb_range){ &y->no_head, sizeof(y->no_head) };
		r[n++] = (struct tb_range){ ords[d], sizeof(*ords[d]) };
		r[n++] = (struct tb_range){ cust(w, db, wi, d, ords[d]->c_id), 24 };
	}
	if (b->begin(ctx) || b->set_ranges(ctx, n, r))
		return -1;
	int64_t sum_all = 0;
	uint64_t count = 0;
	uint64_t now = h->clock++;
	for (uint32_t d = 0; d < DISTRICTS; d++) {
		struct oe_order *or = ords[d];
		if (or == NULL)
			continue;
		dist(w, db, wi, d)->no_head++;
		or->carrier_id = carrier;
		int64_t sum = 0;
		for (uint32_t l = 0; l < or->ol_cnt; l++) {
			or->lines[l].delivery_d = now;
			sum += or->lines[l].amount;
		}
		struct oe_customer *z = cust(w, db, wi, d, or->c_id);
		z->balance += sum;
		z->delivery_cnt++;
		sum_all += sum;
		count++;
	}
	if (b->commit(ctx))
		return -1;
	w->delivered += sum_all;
	w->deliveries += count;
	return 0;
}

static int
oe_tx(void *wl, void *db, const struct tb_backend *b, void *ctx)
{
	struct oe *w = wl;
	uint64_t k = tb_below(&w->rng, MIX_NEW + MIX_PAY + MIX_DEL);
	int r = k < MIX_NEW ? new_order(w, db, b, ctx) :
		k < MIX_NEW + MIX_PAY ? payment(w, db, b, ctx) :
		delivery_wh(w, db, b, ctx, (uint32_t)tb_below(&w->rng, w->W));
	rows_done(w);
	return r;
}

#define FAIL(...) (snprintf(why, n, __VA_ARGS__), -1)

static int
check_district(const struct oe *w, void *db, uint32_t wi, uint32_t d,
	char *why, size_t n)
{
	const struct oe_district *y = dist(w, db, wi, d);
	uint32_t next = y->next_o_id;
	/* 3: consecutive new-order rows */
	uint32_t cnt = y->no_tail - y->no_head;
	if (cnt > w->R)
		return FAIL("district %u/%u: %u new-order rows", wi, d, cnt);
	uint32_t first = cnt ? *no_row(w, db, wi, d, y->no_head) : next;
	for (uint32_t k = 0; k < cnt; k++)
		if (*no_row(w, db, wi, d, y->no_head + k) != first + k)
			return FAIL("condition 3: district %u/%u new-order rows "
				"are not consecutive", wi, d);
	/* 2: the newest order and new-order row are next_o_id - 1 */
	if (cnt && first + cnt - 1 != next - 1)
		return FAIL("condition 2: district %u/%u max(NO_O_ID) %u, "
			"D_NEXT_O_ID %u", wi, d, first + cnt - 1, next);
	if (order(w, db, wi, d, next - 1)->o_id != next - 1)
		return FAIL("condition 2: district %u/%u max(O_ID) is not "
			"D_NEXT_O_ID - 1", wi, d);
	/* The ring's newest R - 1 orders; the slot after them is free. */
	uint32_t lo = next > w->R - 1 ? next - (w->R - 1) : 1;
	for (uint32_t o_id = lo; o_id < next; o_id++) {
		const struct oe_order *or = order(w, db, wi, d, o_id);
		if (or->o_id != o_id)
			return FAIL("district %u/%u order %u missing", wi, d, o_id);
		bool pending = o_id >= first;
		/* 5 */
		if ((or->carrier_id == 0) != pending)
			return FAIL("condition 5: order %u/%u/%u carrier %u, "
				"new-order row %s", wi, d, o_id, or->carrier_id,
				pending ? "present" : "absent");
		/* 4, 6 */
		if (or->ol_cnt < 5 || or->ol_cnt > MAX_LINES)
			return FAIL("order %u/%u/%u: O_OL_CNT %u", wi, d, o_id,
				or->ol_cnt);
		for (uint32_t l = 0; l < MAX_LINES; l++) {
			const struct oe_line *ln = &or->lines[l];
			bool used = l < or->ol_cnt;
			if ((ln->i_id != 0) != used || ln->i_id > w->I)
				return FAIL("conditions 4/6: order %u/%u/%u has "
					"%u lines, line %u is %s", wi, d, o_id,
					or->ol_cnt, l, used ? "empty" : "set");
			/* 7 */
			if (used && (ln->delivery_d == 0) != pending)
				return FAIL("condition 7: order %u/%u/%u line %u "
					"delivery date vs carrier", wi, d, o_id, l);
		}
	}
	return 0;
}

static int
oe_check(void *wl, const void *cdb, char *why, size_t n)
{
	const struct oe *w = wl;
	void *db = (void *)cdb;
	const struct oe_hdr *h = hdr(w, db);
	if (h->magic != OE_MAGIC)
		return FAIL("bad database magic");
	int64_t cust_sum = 0, stock_ytd = 0;
	uint64_t pay_cnt = 0, del_cnt = 0, stock_cnt = 0, next_sum = 0;
	for (uint32_t wi = 0; wi < w->W; wi++) {
		int64_t dsum = 0;
		for (uint32_t d = 0; d < DISTRICTS; d++) {
			const struct oe_district *y = dist(w, db, wi, d);
			dsum += y->ytd;
			/* 9 */
			if (y->ytd != w->d_ytd[wi * DISTRICTS + d])
				return FAIL("condition 9: D_YTD %u/%u is %lld, "
					"payments say %lld", wi, d,
					(long long)y->ytd,
					(long long)w->d_ytd[wi * DISTRICTS + d]);
			next_sum += y->next_o_id - (w->C + 1);
			if (check_district(w, db, wi, d, why, n))
				return -1;
			for (uint32_t c = 0; c < w->C; c++) {
				const struct oe_customer *z = cust(w, db, wi, d, c);
				cust_sum += z->balance + z->ytd_payment;
				pay_cnt += z->payment_cnt;
				del_cnt += z->delivery_cnt;
			}
		}
		/* 1, 8 */
		if (wh(w, db, wi)->ytd != dsum)
			return FAIL("condition 1: W_YTD %u is %lld, sum(D_YTD) "
				"%lld", wi, (long long)wh(w, db, wi)->ytd,
				(long long)dsum);
		if (wh(w, db, wi)->ytd != w->w_ytd[wi])
			return FAIL("condition 8: W_YTD %u is %lld, payments say "
				"%lld", wi, (long long)wh(w, db, wi)->ytd,
				(long long)w->w_ytd[wi]);
		for (uint32_t i = 0; i < w->I; i++) {
			stock_ytd += stock(w, db, wi, i)->ytd;
			stock_cnt += stock(w, db, wi, i)->order_cnt;
		}
	}
	/* 12 */
	if (cust_sum != w->init_cust + w->delivered)
		return FAIL("condition 12: sum(C_BALANCE + C_YTD_PAYMENT) %lld, "
			"expected %lld", (long long)cust_sum,
			(long long)(w->init_cust + w->delivered));
	if (pay_cnt != w->init_pay_cnt + w->payments ||
	    del_cnt != w->deliveries)
		return FAIL("customer counts: payments %llu (expected %llu), "
			"deliveries %llu (expected %llu)",
			(unsigned long long)pay_cnt,
			(unsigned long long)(w->init_pay_cnt + w->payments),
			(unsigned long long)del_cnt,
			(unsigned long long)w->deliveries);
	if (stock_ytd != w->stock_ytd || stock_cnt != w->stock_cnt)
		return FAIL("stock: sum(S_YTD) %lld (expected %lld), "
			"sum(S_ORDER_CNT) %llu (expected %llu)",
			(long long)stock_ytd, (long long)w->stock_ytd,
			(unsigned long long)stock_cnt,
			(unsigned long long)w->stock_cnt);
	if (next_sum != w->new_orders)
		return FAIL("D_NEXT_O_ID advanced %llu, committed new-orders "
			"%llu", (unsigned long long)next_sum,
			(unsigned long long)w->new_orders);
	if (h->hist_head != w->hist_n)
		return FAIL("history head %llu, committed payments %llu",
			(unsigned long long)h->hist_head,
			(unsigned long long)w->hist_n);
	/* The newest hist_cap - 1 rows; the slot at the head is free. */
	uint64_t used = w->hist_n < w->hist_cap - 1 ? w->hist_n :
		w->hist_cap - 1;
	int64_t hs = 0;
	for (uint64_t k = w->hist_n - used; k < w->hist_n; k++)
		hs += hist(w, db, k)->amount;
	if (hs != w->ring_sum)
		return FAIL("history amounts sum to %lld, the last %llu "
			"payments to %lld", (long long)hs,
			(unsigned long long)used, (long long)w->ring_sum);
	return 0;
}

static int
oe_recovered(void *wl, const void *cdb, uint64_t *committed, char *why,
	size_t n)
{
	const struct oe *w = wl;
	void *db = (void *)cdb;
	const struct oe_hdr *h = hdr(w, db);
	if (h->magic != OE_MAGIC)
		return FAIL("bad database magic");
	for (uint32_t wi = 0; wi < w->W; wi++) {
		int64_t dsum = 0;
		for (uint32_t d = 0; d < DISTRICTS; d++) {
			dsum += dist(w, db, wi, d)->ytd;
			if (check_district(w, db, wi, d, why, n))
				return -1;
		}
		/* 1 */
		if (wh(w, db, wi)->ytd != dsum)
			return FAIL("condition 1: W_YTD %u is %lld, sum(D_YTD) "
				"%lld", wi, (long long)wh(w, db, wi)->ytd,
				(long long)dsum);
	}
	*committed = h->clock - 1; /* populated at 1, +1 per commit */
	return 0;
}

static void
oe_fini(void *wl)
{
	struct oe *w = wl;
	free(w->w_ytd);
	free(w->d_ytd);
	free(w->ring);
	free(w);
}

const struct tb_workload tb_order_entry = {
	.name = "order-entry",
	.init = oe_init,
	.populate = oe_populate,
	.tx = oe_tx,
	.check = oe_check,
	.check_recovered = oe_recovered,
	.fini = oe_fini,
};
