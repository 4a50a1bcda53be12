// SPDX-License-Identifier: BSD-3-Clause
// heap_test.cpp -- vista_malloc/vista_free/vista_root, logged logically
#include "vista_test.hpp"

#include "heap_layout.h"

using vt::Env;

// The page map check as FORMAT.md defines it: CRC-16/CCITT, polynomial
// 0x1021, initial 0, of bytes 0, 1, 4, 5, 6, 7, a bit at a time.
static unsigned crc_by_bits(uint64_t e)
{
	unsigned crc = 0;
	for (int i : { 0, 1, 4, 5, 6, 7 }) {
		crc ^= (unsigned)((e >> (8 * i)) & 0xff) << 8;
		for (int b = 0; b < 8; b++)
			crc = ((crc << 1) ^ ((crc & 0x8000) ? 0x1021 : 0)) &
				0xffff;
	}
	return crc;
}

TEST_CASE("the page map check is the CRC-16 the format names", "[heap]")
{
	test::Rng rng(7);
	// The bitwise reference itself, on the standard check string.
	uint64_t e;
	unsigned crc = 0;
	for (char c : std::string("123456789")) {
		crc ^= (unsigned)(unsigned char)c << 8;
		for (int b = 0; b < 8; b++)
			crc = ((crc << 1) ^ ((crc & 0x8000) ? 0x1021 : 0)) &
				0xffff;
	}
	REQUIRE(crc == 0x31c3);
	for (int i = 0; i < 100000; i++) {
		e = rng.next();
		REQUIRE(vista_pg_crc(e) == crc_by_bits(e));
	}
	REQUIRE(vista_pg_crc(0) == 0);
}

static void check(vista_segment *s, struct vista_heap_info *info = nullptr)
{
	struct vista_heap_info i;
	VREQUIRE_OK(vista_heap_check(s, &i));
	if (info)
		*info = i;
}

TEST_CASE("malloc and free outside a transaction are transactions of their "
	  "own",
	"[heap]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	std::set<uintptr_t> got;

	for (size_t size : { 1, 16, 17, 100, 2048, 2049, 4096, 4097, 50000 }) {
		void *p = nullptr;
		VREQUIRE_OK(vista_malloc(s, size, &p));
		REQUIRE(p != nullptr);
		REQUIRE((uintptr_t)p % 16 == 0);
		REQUIRE(vista_usable_size(s, p) >= size);
		REQUIRE(vista_usable_size(s, p) < size + (size > 2048 ? 4096 : size / 4 + 17));
		memset(p, 0xab, size);
		REQUIRE(got.insert((uintptr_t)p).second);
	}
	REQUIRE_FALSE(vista_in_transaction(v));
	struct vista_heap_info info;
	check(s, &info);
	REQUIRE(info.blocks == 9);
	REQUIRE(vt::blocks(s).size() == 9);
	for (uintptr_t p : got)
		VREQUIRE_OK(vista_free(s, (void *)p));
	check(s, &info);
	REQUIRE(info.blocks == 0);
	REQUIRE(info.large_pages == 0);
	struct vista_stats st = vt::stats(v);
	REQUIRE(st.heap_allocs == 9);
	REQUIRE(st.heap_frees == 9);
	REQUIRE(st.tx_committed == 18);
	VREQUIRE_OK(vista_free(s, nullptr)); // like free(3)
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("abort frees what the transaction allocated and keeps what it "
	  "freed",
	"[heap]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	void *keep, *keep_large;
	VREQUIRE_OK(vista_malloc(s, 64, &keep));
	VREQUIRE_OK(vista_malloc(s, 10000, &keep_large));
	auto before = vt::blocks(s);

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	void *a, *b, *c;
	VREQUIRE_OK(vista_malloc(s, 64, &a));
	VREQUIRE_OK(vista_malloc(s, 9000, &b));
	VREQUIRE_OK(vista_malloc(s, 300, &c));
	VREQUIRE_OK(vista_free(s, keep));
	VREQUIRE_OK(vista_free(s, keep_large));
	VREQUIRE_OK(vista_free(s, c)); // allocated and freed in one go
	// Until commit, freed blocks are still allocated.
	REQUIRE(vista_usable_size(s, keep) == 64);
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(vt::blocks(s) == before);
	check(s);

	// Commit: the frees take effect, the allocations stay.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_malloc(s, 64, &a));
	VREQUIRE_OK(vista_free(s, keep));
	VREQUIRE_OK(vista_free(s, keep_large));
	VREQUIRE_OK(vista_end_transaction(v));
	auto after = vt::blocks(s);
	REQUIRE(after.size() == 1);
	REQUIRE(after.count((uintptr_t)a) == 1);
	REQUIRE(vista_usable_size(s, keep) == 0);
	check(s);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("an allocation flushes what it changed; a new run's page map "
	  "entry once, with the allocation's record",
	"[heap][budget]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	vt::Tracer tr;
	for (int i = 0; i < 3; i++) {
		struct vista_stats a = vt::stats(v);
		tr.reset();
		void *p;
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_malloc(s, 128, &p)); // 2 aligned lines
		memset(p, i, 128);
		VREQUIRE_OK(vista_end_transaction(v));
		struct vista_stats b = vt::stats(v);
		INFO("allocation " << i);
		// The ALLOC record's fence (its tag goes with it), then
		// commit's two.
		CHECK(b.fences - a.fences == 3);
		// Record, bitmap word, the run's page map entry (its
		// check), 2 block lines, lane header; the first allocation
		// also creates the run: its page map entry once more, with
		// the record.
		CHECK(b.flushes - a.flushes == (i == 0 ? 7u : 6u));
		CHECK(tr.flush_lines == b.flushes - a.flushes);
	}
	check(s);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("an aborted allocation gives its block back as stateless memory",
	"[heap]")
{
	// What the transaction stored in a block it allocated is not state
	// once the abort frees the block: it is never flushed, and a tracer
	// is told not to expect it durable (rio_durable_discard).
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	vt::Tracer tr;
	void *a, *b;
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_malloc(s, 128, &a));
	VREQUIRE_OK(vista_malloc(s, 9000, &b));
	memset(a, 1, 128);
	memset(b, 1, 9000);
	uint64_t lines = tr.flush_lines;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(tr.discards == 2);
	REQUIRE(tr.discarded_bytes == 128 + 3 * 4096);
	// The abort flushes the bitmap word and the 3 page map entries
	// (one line each here), the lane header; not the blocks.
	REQUIRE(tr.flush_lines - lines == 3);
	check(s);

	tr.reset();
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_malloc(s, 100, &a));
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE(tr.discards == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("bad pointers and double frees are refused", "[heap]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	vista_segment *s2 = vt::map(v, e.seg("b"), 1);
	char *p, *q, *big;
	VREQUIRE_OK(vista_malloc(s, 100, (void **)&p));
	VREQUIRE_OK(vista_malloc(s2, 100, (void **)&q));
	VREQUIRE_OK(vista_malloc(s, 3 * 4096, (void **)&big));
	int local;

	VREQUIRE_RC(vista_free(s, &local), VISTA_EBADPTR);
	VREQUIRE_RC(vista_free(s, q), VISTA_EBADPTR); // another segment's
	VREQUIRE_RC(vista_free(s, p + 16), VISTA_EBADPTR); // interior
	VREQUIRE_RC(vista_free(s, p + 112), VISTA_EBADPTR); // a free block
	VREQUIRE_RC(vista_free(s, big + 4096), VISTA_EBADPTR); // large, inside
	VREQUIRE_RC(vista_free(s, (char *)vista_segment_base(s) +
					  vista_segment_size(s) - 4096),
		VISTA_EBADPTR); // a free page
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_free(s, p));
	VREQUIRE_RC(vista_free(s, p), VISTA_EBADPTR); // twice in one tx
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_RC(vista_free(s, p), VISTA_EBADPTR); // freed already
	REQUIRE(vista_usable_size(s, p) == 0);
	VREQUIRE_RC(vista_malloc(s, 0, (void **)&p), -EINVAL);
	VREQUIRE_RC(vista_malloc(s, 8, nullptr), -EINVAL);
	VREQUIRE_RC(vista_malloc(nullptr, 8, (void **)&p), -EINVAL);
	check(s);
	check(s2);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a full heap returns VISTA_ENOMEM; the transaction stays "
	  "abortable",
	"[heap]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, 64 << 10); // 16 pages
	std::vector<void *> small;

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	void *p;
	int rc;
	while ((rc = vista_malloc(s, 2000, &p)) == 0)
		small.push_back(p);
	VREQUIRE_RC(rc, VISTA_ENOMEM);
	REQUIRE(small.size() == 16 * 2);
	VREQUIRE_RC(vista_malloc(s, 5000, &p), VISTA_ENOMEM);
	VREQUIRE_RC(vista_malloc(s, 1 << 30, &p), VISTA_ENOMEM);
	VREQUIRE_OK(vista_abort_transaction(v));
	struct vista_heap_info info;
	check(s, &info);
	REQUIRE(info.blocks == 0);

	// Empty runs go back to the page pool when a large object needs
	// them.
	VREQUIRE_OK(vista_malloc(s, 16 * 4096, &p));
	REQUIRE(vista_usable_size(s, p) == 16 * 4096);
	VREQUIRE_RC(vista_malloc(s, 16, &p), VISTA_ENOMEM);
	check(s, &info);
	REQUIRE(info.large_pages == 16);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("size classes pack blocks; walk and check see every block",
	"[heap]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, 8 << 20);
	std::map<uintptr_t, size_t> mine;
	test::Rng rng(test::seed());

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	for (int i = 0; i < 3000; i++) {
		size_t n = 1 + rng.below(i % 10 == 0 ? 20000 : 2048);
		void *p;
		VREQUIRE_OK(vista_malloc(s, n, &p));
		size_t u = vista_usable_size(s, p);
		REQUIRE(u >= n);
		// No overlap with any other live block.
		auto it = mine.upper_bound((uintptr_t)p);
		if (it != mine.end())
			REQUIRE((uintptr_t)p + u <= it->first);
		if (it != mine.begin()) {
			--it;
			REQUIRE(it->first + it->second <= (uintptr_t)p);
		}
		mine[(uintptr_t)p] = u;
	}
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE(vt::blocks(s) == mine);
	struct vista_heap_info info;
	check(s, &info);
	REQUIRE(info.blocks == 3000);
	uint64_t bytes = 0;
	for (auto &m : mine)
		bytes += m.second;
	REQUIRE(info.bytes == bytes);
	REQUIRE(info.free_pages + info.run_pages + info.large_pages ==
		info.pages);
	// A walk callback can stop the walk.
	REQUIRE(vista_heap_walk(s, [](void *, size_t, void *) { return 7; },
			nullptr) == 7);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("the root object: zeroed once, the same block afterwards", "[heap]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *r, *r2;

	VREQUIRE_OK(vista_root(s, 100, (void **)&r));
	for (int i = 0; i < 12; i++)
		REQUIRE(r[i] == 0);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, r, 8));
	r[0] = 42;
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_root(s, 50, (void **)&r2));
	REQUIRE(r2 == r);
	VREQUIRE_RC(vista_root(s, 101, (void **)&r2), VISTA_ERANGE);
	VREQUIRE_OK(vista_fini(v));

	v = e.open();
	s = vt::map(v, e.seg("a"), 0);
	VREQUIRE_OK(vista_root(s, 100, (void **)&r2));
	REQUIRE(r2 == r);
	REQUIRE(r2[0] == 42);

	// A root made in an aborted transaction is not made.
	vista_segment *t = vt::map(v, e.seg("b"), 1);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_root(t, 64, (void **)&r));
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(vt::blocks(t).empty());
	VREQUIRE_OK(vista_root(t, 64, (void **)&r2));
	REQUIRE(vt::blocks(t).size() == 1);
	check(t);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("native pointers in the heap stay valid across runs", "[heap]")
{
	Env e;
	struct node {
		node *next;
		uint64_t value;
	};
	{
		vista *v = e.open();
		vista_segment *s = vt::map(v, e.seg("a"), 0);
		node **head;
		VREQUIRE_OK(vista_root(s, sizeof(node *), (void **)&head));
		for (uint64_t i = 0; i < 100; i++) {
			node *n;
			VREQUIRE_OK(vista_begin_transaction(v, 0));
			VREQUIRE_OK(vista_malloc(s, sizeof(node), (void **)&n));
			n->next = *head;
			n->value = i;
			VREQUIRE_OK(vista_set_range(v, head, sizeof(*head)));
			*head = n;
			VREQUIRE_OK(vista_end_transaction(v));
		}
		VREQUIRE_OK(vista_fini(v));
	}
	vista *v = e.open();
	vista_segment *s = nullptr;
	VREQUIRE_OK(vista_map(v, e.seg("a").c_str(), nullptr, 0, 0, &s));
	REQUIRE(vista_segment_base(s) > vt::addr(0));
	node **head;
	VREQUIRE_OK(vista_root(s, sizeof(node *), (void **)&head));
	uint64_t want = 100, count = 0;
	for (node *n = *head; n; n = n->next) {
		REQUIRE(n->value == --want);
		count++;
	}
	REQUIRE(count == 100);
	REQUIRE(vt::blocks(s).size() == 101);
	VREQUIRE_OK(vista_fini(v));
}
