/* The event queue, ordered by (time, insertion sequence) so runs are deterministic.
 *
 * A calendar of CAL_BUCKETS buckets of 2^CAL_SHIFT ps covers the next ~67 us; a bucket is an
 * unsorted list of blocks of CAL_BLOCK events (a bucket holds dozens of events on a large fabric:
 * read a block at a time, not an event at a time through links), found by a bitmap. The bucket being drained is a small 4-ary heap ("now"),
 * and events beyond the calendar wait in another 4-ary heap ("later") until the calendar
 * reaches them. Packet events cluster within a few microseconds, so the heaps stay tiny.
 */
#include "sim.h"

#include <stdlib.h>

static inline int ev_less(const Event *x, const Event *y) {
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static void heap_push(Heap *h, Event e) {
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 256;
        h->ev = realloc(h->ev, (size_t)h->cap * sizeof(Event));
    }
    int64_t i = h->n++;
    while (i > 0) {
        int64_t parent = (i - 1) / 4;
        if (!ev_less(&e, &h->ev[parent])) break;
        h->ev[i] = h->ev[parent];
        i = parent;
    }
    h->ev[i] = e;
}

static Event heap_pop(Heap *h) {
    Event top = h->ev[0];
    Event last = h->ev[--h->n];
    int64_t i = 0, n = h->n;
    for (;;) {
        int64_t c = 4 * i + 1;
        if (c >= n) break;
        int64_t best = c, end = c + 4 < n ? c + 4 : n;
        for (int64_t k = c + 1; k < end; k++)
            if (ev_less(&h->ev[k], &h->ev[best])) best = k;
        if (!ev_less(&h->ev[best], &last)) break;
        h->ev[i] = h->ev[best];
        i = best;
    }
    if (n > 0) h->ev[i] = last;
    return top;
}

#define CAL_WIDTH ((ps_t)1 << CAL_SHIFT)
#define CAL_SPAN (CAL_WIDTH * CAL_BUCKETS)

/* put an event in its calendar bucket (its time is within the calendar's span) */
static void cal_insert(EventQueue *q, Event e) {
    int64_t b = (e.t >> CAL_SHIFT) & (CAL_BUCKETS - 1);
    /* the block being filled and its count, both from head[]: the block is written, not read */
    int32_t head = q->head[b], k = head >> 3, n = head & 7;
    if (head < 0 || n == CAL_BLOCK) {
        if (q->free < 0)
            q->blocks = pool_grow(q->blocks, sizeof(CalBlock), offsetof(CalBlock, next), &q->cap, &q->free, 256);
        int32_t fresh = q->free;
        q->free = q->blocks[fresh].next;
        q->blocks[fresh].next = head < 0 ? -1 : k; /* a new block in front of the bucket's */
        if (head < 0) q->bits[b >> 6] |= 1ULL << (b & 63);
        k = fresh;
        n = 0;
    }
    q->blocks[k].ev[n] = e;
    q->head[b] = k << 3 | (n + 1);
    q->in_calendar++;
}

static void prefetch_block(const CalBlock *B) {
    for (size_t line = 0; line < sizeof(CalBlock); line += 64) __builtin_prefetch((const char *)B + line);
}

void ev_push(Sim *s, ps_t t, int type, int a, int b, int c) {
    EventQueue *q = &s->evq;
    Event e = {t, s->seq++, type, a, b, c};
    if (t < q->now_end)
        heap_push(&q->now, e);
    else if (t < q->now_end - CAL_WIDTH + CAL_SPAN)
        cal_insert(q, e);
    else
        heap_push(&q->later, e);
    q->count++;
}

/* the first non-empty bucket at or after bucket `from`, cyclically; -1 if none */
static int64_t next_bucket(const EventQueue *q, int64_t from) {
    for (int64_t k = 0; k <= CAL_WORDS; k++) {
        int64_t w = ((from >> 6) + k) & (CAL_WORDS - 1);
        uint64_t bits = q->bits[w];
        if (k == 0) bits &= ~0ULL << (from & 63);
        if (k == CAL_WORDS) bits &= ~(~0ULL << (from & 63));
        if (bits) return w * 64 + __builtin_ctzll(bits);
    }
    return -1;
}

/* make the next non-empty stretch of time the current bucket */
static void advance(EventQueue *q) {
    ps_t start = q->now_end;
    if (q->in_calendar == 0) {
        if (q->later.n == 0) return;
        start = q->later.ev[0].t & ~(CAL_WIDTH - 1); /* jump over the empty calendar */
    } else {
        int64_t from = (start >> CAL_SHIFT) & (CAL_BUCKETS - 1);
        int64_t b = next_bucket(q, from);
        start += ((b - from) & (CAL_BUCKETS - 1)) << CAL_SHIFT;
    }
    q->now_end = start + CAL_WIDTH;
    /* later events the calendar now covers move into it (or into the current bucket) */
    while (q->later.n > 0 && q->later.ev[0].t < start + CAL_SPAN) {
        Event e = heap_pop(&q->later);
        if (e.t < q->now_end)
            heap_push(&q->now, e);
        else
            cal_insert(q, e);
    }
    int64_t b = (start >> CAL_SHIFT) & (CAL_BUCKETS - 1);
    for (int32_t k = q->head[b] >> 3, n = q->head[b] & 7; k >= 0; n = CAL_BLOCK) {
        CalBlock *B = &q->blocks[k];
        int32_t next = B->next;
        if (next >= 0) prefetch_block(&q->blocks[next]);
        for (int i = 0; i < n; i++) heap_push(&q->now, B->ev[i]);
        q->in_calendar -= n;
        B->next = q->free;
        q->free = k;
        k = next;
    }
    q->head[b] = -1;
    q->bits[b >> 6] &= ~(1ULL << (b & 63));
    /* the next bucket's first block, written long ago, is fetched while this one's events run
     * (reading the calendar was most of ev_next's time at 1,024 servers) */
    if (q->in_calendar > 0) {
        int64_t next = next_bucket(q, (b + 1) & (CAL_BUCKETS - 1));
        if (next >= 0) prefetch_block(&q->blocks[q->head[next] >> 3]);
    }
}

/* the ports and packets of a bucket's events, fetched as it becomes the current one: most of
 * an event's time on a large fabric was the misses on them */
static void prefetch_bucket(const Sim *s) {
    const Heap *h = &s->evq.now;
    for (int64_t i = 0; i < h->n; i++) {
        const Event *e = &h->ev[i];
        if (e->type == EV_ARRIVE) __builtin_prefetch(&s->pkts[e->b]);
        if (e->type == EV_ARRIVE || e->type == EV_TX_DONE) __builtin_prefetch(&s->ports[e->a]);
        if (e->type == EV_TX_DONE) __builtin_prefetch(&s->ports[e->a].active); /* a NIC's flows */
    }
}

int ev_next(Sim *s, ps_t until, Event *out) {
    EventQueue *q = &s->evq;
    if (q->now.n == 0 && q->count > 0) {
        while (q->now.n == 0 && q->count > 0) advance(q);
        prefetch_bucket(s);
    }
    if (q->now.n == 0 || q->now.ev[0].t > until) return 0;
    *out = heap_pop(&q->now);
    q->count--;
    return 1;
}

void evq_init(EventQueue *q) {
    q->head = malloc(CAL_BUCKETS * sizeof(int32_t));
    for (int64_t b = 0; b < CAL_BUCKETS; b++) q->head[b] = -1;
    q->bits = calloc(CAL_WORDS, sizeof(uint64_t));
    q->free = -1;
    q->now_end = CAL_WIDTH;
}

void evq_free(EventQueue *q) {
    free(q->head);
    free(q->bits);
    free(q->blocks);
    free(q->now.ev);
    free(q->later.ev);
}
